#!/bin/sh
# setup.sh — on a fresh Debian machine: install what timeprest needs, build it, and run a short
# end-to-end demo (schedule grid, simulation, formula validation) on the CPU.
set -e
cd "$(dirname "$0")"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
sh .ci/install-deps.sh
[ -x configure ] || autoreconf -fi
[ -f Makefile ] || ./configure
make -j"$(nproc)"
echo
echo "== timeprest schedule -s timeprest -w 3 -n 2 -k 6"
./timeprest schedule -s timeprest -w 3 -n 2 -k 6
echo
echo "== timeprest simulate -s timeprest -w 6 -n 2 -k 20"
./timeprest simulate -s timeprest -w 6 -n 2 -k 20
echo
echo "== timeprest validate -w 2-10 -n 2-8"
./timeprest validate -w 2-10 -n 2-8
