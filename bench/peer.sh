#!/bin/sh
# peer.sh — per-core training speed of `timeprest train -w 1` against PyTorch on one CPU thread, on
# `cnn` and `mlp-deep` (batch 128, SGD lr 0.01, momentum 0.9, weight decay 1e-4, Fashion-MNIST), side
# by side in one run, best of R runs of K mini-batches each, with the load average.  Two measures:
# wall samples/s (timeprest: its own training-time samples_per_second; PyTorch: K mini-batches
# after a warm-up) and CPU samples/s (timeprest: the process CPU time of a -k 2K run minus that of a
# -k K run, so that loading, profiling and the test pass cancel; PyTorch: process CPU time of the
# K timed mini-batches) — the CPU measure is the one that holds on a shared machine.
# Creates the virtual environment VENV (PyTorch from PyPI) if it is missing.  Not part of `make check`.
# Usage: bench/peer.sh [BUILDDIR [K [R]]]   (env: VENV, default ../o-venv beside the source tree)
set -e
b=${1:-.}
k=${2:-40}
r=${3:-3}
venv=${VENV:-$(cd "$(dirname "$0")/.." && pwd)-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi
cores=$(getconf _NPROCESSORS_ONLN)
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
field() { sed -n "s/.*\"$1\": \\([-0-9.e+]*\\).*/\\1/p" | head -n 1; }
max() { if [ -z "$1" ] || [ "$(echo "$2 > $1" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi; }
cpu_of() { # command... → user+sys seconds of the command
  /usr/bin/time -f '%U %S' -o "$tmp" "$@" > /dev/null
  awk '{ print $1 + $2 }' "$tmp"
}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "== peer: timeprest train -s gpipe -w 1 -n 1 vs PyTorch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') (1 thread), batch 128, K=$k, best of $r"
echo "   $cores cores, $(uname -m); load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-9s %15s %15s %15s %15s %7s %7s\n' model "tp samples/s" "torch samples/s" "tp cpu-s/s" "torch cpu-s/s" wall cpu
for m in cnn mlp-deep; do
  tw=""; pw=""; tc=""; pc=""
  i=0
  while [ $i -lt "$r" ]; do
    tw=$(max "$tw" "$("$b/timeprest" train -s gpipe -w 1 -n 1 --model $m --batch 128 -k "$k" --format json -q | field samples_per_second)")
    c1=$(cpu_of "$b/timeprest" train -s gpipe -w 1 -n 1 --model $m --batch 128 -k "$k" -q)
    c2=$(cpu_of "$b/timeprest" train -s gpipe -w 1 -n 1 --model $m --batch 128 -k $((2 * k)) -q)
    tc=$(max "$tc" "$(echo "$k * 128 / ($c2 - $c1)" | bc -l)")
    out=$("$venv/bin/python" "$(dirname "$0")/peer-torch.py" --model $m --batch 128 -k "$k")
    pw=$(max "$pw" "$(echo "$out" | field samples_per_second)")
    pc=$(max "$pc" "$(echo "$out" | field cpu_samples_per_second)")
    i=$((i + 1))
  done
  printf '%-9s %15.1f %15.1f %15.1f %15.1f %6.2fx %6.2fx\n' $m "$tw" "$pw" "$tc" "$pc" \
    "$(echo "$tw / $pw" | bc -l)" "$(echo "$tc / $pc" | bc -l)"
done
echo "   load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
