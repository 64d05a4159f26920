#!/bin/sh
# speedup.sh — a pipeline's speed-up over the fastest way to train the same network on this machine:
# mlp-deep, batch 128, SGD (lr 0.01, momentum 0.9, weight decay 1e-4), Fashion-MNIST.  Side by side in
# one sitting, R rounds, each configuration once per round in the same order, best round reported:
#   plain SGD on one worker — `train -s gpipe -w 1 -n 1` on one BLAS thread and with `--threads CORES`
#   (one stage on every core: the fastest single worker, the baseline of the speed-up);
#   TiMePReSt (forwards fused where the simulator says it is faster, the default, and not fused),
#   V-TiMePReSt, PipeDream and GPipe at W = CORES, N = 4;
#   PyTorch (bench/peer-torch.py) on 1 thread and on CORES threads.
# Prints samples/s per round, the best, the speed-up over the best single worker, and for the
# pipelines the predicted and measured time per mini-batch.  Not part of `make check`.
# Usage: bench/speedup.sh [BUILDDIR [K [R]]]   (env: VENV, the PyTorch environment; default ../o-venv
# beside the source tree, created as bench/peer.sh does; DATA: a data directory)
set -e
b=${1:-.}
k=${2:-60}
r=${3:-3}
cores=$(getconf _NPROCESSORS_ONLN)
venv=${VENV:-$(cd "$(dirname "$0")/.." && pwd)-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi
dataopt=""
[ -n "$DATA" ] && dataopt="--data $DATA"
field() { sed -n "s/.*\"$1\": \\([-0-9.e+]*\\).*/\\1/p" | head -n 1; }
tpm() { grep -o '"time_per_mini_batch": [-0-9.e+]*' | sed -n "${1}p" | sed 's/.*: //'; }
configs="sgd-1|-s gpipe -w 1 -n 1
sgd-$cores|-s gpipe -w 1 -n 1 --threads $cores
timeprest|-s timeprest -w $cores -n 4
timeprest-unfused|-s timeprest -w $cores -n 4 --fuse-forwards off
v-timeprest|-s v-timeprest -w $cores -n 4
pipedream|-s pipedream -w $cores -n 4
gpipe|-s gpipe -w $cores -n 4
torch-1|1
torch-$cores|$cores"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== speed-up on mlp-deep, batch 128, K=$k, $r rounds; $cores cores, $(uname -m); load average $(cut -d' ' -f1-3 /proc/loadavg)"
i=1
while [ $i -le "$r" ]; do
  echo "$configs" | while IFS='|' read -r name args; do
    case $name in
    torch-*)
      "$venv/bin/python" "$(dirname "$0")/peer-torch.py" --model mlp-deep --batch 128 -k "$k" --threads "$args" \
        > "$tmp/$name.$i" ;;
    *)
      # shellcheck disable=SC2086 # option lists
      "$b/timeprest" train $args --model mlp-deep --batch 128 -k "$k" $dataopt --format json -q > "$tmp/$name.$i" ;;
    esac
  done
  i=$((i + 1))
done
best_of() { for f in "$tmp/$1".*; do field samples_per_second < "$f"; done | sort -g | tail -n 1; }
base=$(best_of sgd-1)
b1=$base
b2=$(best_of "sgd-$cores")
[ "$(echo "$b2 > $base" | bc -l)" = 1 ] && base=$b2
printf '%-18s %-26s %10s %8s %8s %14s %14s\n' run "samples/s (rounds)" best "vs sgd-1" "vs best" "predicted s/mb" "measured s/mb"
echo "$configs" | while IFS='|' read -r name args; do
  rounds=$(for f in "$tmp/$name".*; do printf '%.0f ' "$(field samples_per_second < "$f")"; done)
  best=$(best_of "$name")
  pred="" meas=""
  case $name in
  torch-*) ;;
  *)
    bf=$(for f in "$tmp/$name".*; do echo "$(field samples_per_second < "$f") $f"; done | sort -g | tail -n 1 | cut -d' ' -f2)
    pred=$(tpm 1 < "$bf") meas=$(tpm 2 < "$bf") ;;
  esac
  printf '%-18s %-26s %10.1f %7.2fx %7.2fx %14s %14s\n' "$name" "$rounds" "$best" "$(echo "$best / $b1" | bc -l)" \
    "$(echo "$best / $base" | bc -l)" "$pred" "$meas"
done
echo "   load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
