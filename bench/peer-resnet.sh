#!/bin/sh
# peer-resnet.sh — ResNet-50 (resnet50-cifar100: torchvision's v1.5 with 100 classes on 3x32x32
# inputs), batch 32, synthetic data, SGD (lr 0.01, momentum 0.9, weight decay 1e-4): timeprest
# against PyTorch (bench/peer-torch.py, the same network, 23,712,932 parameters), side by side in one
# sitting, R rounds, each configuration once per round in the same order, best round reported:
#   one thread — `train -s gpipe -w 1 -n 1 --threads 1` against PyTorch on 1 thread;
#   two cores  — `train -s gpipe -w 1 -n 1 --threads 2` (the fastest single worker), TiMePReSt on
#                W = 2 stages (N = 4) and GPipe on W = 2, against PyTorch on 2 threads.
# samples/s: timeprest's own training-time samples_per_second over K mini-batches; PyTorch's K timed
# mini-batches after a warm-up.  Not part of `make check`.
# Usage: bench/peer-resnet.sh [BUILDDIR [K [R]]]   (env: TP_TORCH_PYTHON, a Python with torch; default
# the one bench/torch-venv.sh makes)
set -e
b=${1:-.}
k=${2:-20}
r=${3:-3}
py=${TP_TORCH_PYTHON:-$(sh "$(dirname "$0")/torch-venv.sh")}
field() { sed -n "s/.*\"$1\": \\([-0-9.e+]*\\).*/\\1/p" | head -n 1; }
max() { if [ -z "$1" ] || [ "$(echo "$2 > $1" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi; }
tp() { # options... → samples/s
  "$b/timeprest" train -m resnet50-cifar100 --batch 32 -k "$k" -d synthetic:1024:32 --format json -q "$@" |
    field samples_per_second
}
torch() { # threads → samples/s
  OMP_NUM_THREADS=$1 "$py" "$(dirname "$0")/peer-torch.py" --model resnet50-cifar100 --data synthetic --batch 32 \
    -k "$k" --warmup 3 --threads "$1" 2>/dev/null | field samples_per_second
}
echo "== resnet50-cifar100, batch 32, K=$k, best of $r; $(getconf _NPROCESSORS_ONLN) cores, $(uname -m)"
echo "   PyTorch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null); load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
t1=""; p1=""; s2=""; tw=""; gw=""; p2=""
i=0
while [ $i -lt "$r" ]; do
  t1=$(max "$t1" "$(tp -s gpipe -w 1 -n 1 --threads 1)")
  p1=$(max "$p1" "$(torch 1)")
  s2=$(max "$s2" "$(tp -s gpipe -w 1 -n 1 --threads 2)")
  tw=$(max "$tw" "$(tp -s timeprest -w 2 -n 4)")
  gw=$(max "$gw" "$(tp -s gpipe -w 2 -n 4)")
  p2=$(max "$p2" "$(torch 2)")
  i=$((i + 1))
done
printf '%-44s %10s %9s\n' configuration samples/s "vs torch"
row() { printf '%-44s %10.1f %8.2fx\n' "$1" "$2" "$(echo "$2 / $3" | bc -l)"; }
row "timeprest gpipe -w 1 --threads 1" "$t1" "$p1"
row "PyTorch, 1 thread" "$p1" "$p1"
row "timeprest gpipe -w 1 --threads 2" "$s2" "$p2"
row "timeprest timeprest -w 2 -n 4" "$tw" "$p2"
row "timeprest gpipe -w 2 -n 4" "$gw" "$p2"
row "PyTorch, 2 threads" "$p2" "$p2"
echo "   load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
