#!/bin/sh
# setup.sh — on a fresh Debian machine: install what timeprest needs, build it, and run a short
# end-to-end demo on the CPU: a schedule grid, a simulation, the formula sweep, every preset on
# VGG-16 / Tiny-ImageNet on cluster C, a timeline picture, and a few seconds of real training on
# Fashion-MNIST with the prediction beside the measurement.
set -e
cd "$(dirname "$0")"
sh .ci/install-deps.sh
[ -x configure ] || autoreconf -fi
[ -f Makefile ] || ./configure
make -j"$(nproc)"
run() { echo; echo "== $*"; "$@"; }
run ./timeprest schedule -s timeprest -w 3 -n 2 -k 6
run ./timeprest simulate -s timeprest -w 6 -n 2 -k 20
run ./timeprest validate -w 2-10 -n 2-8
run ./timeprest compare --model vgg16-tinyimagenet --cluster C -n 4 --batch 128
run ./timeprest plot timeline -s timeprest -w 4 -n 2 -k 8 --versions -o demo-timeline.png
echo "wrote demo-timeline.png"
run ./timeprest train -s timeprest -w 2 -n 4 -k 50
