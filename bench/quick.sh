#!/bin/sh
# quick.sh — `make bench-quick`: the simulator's speed targets, each figure beside its target, in
# about 30 s on 2 cores (bench/RESULTS.md keeps the current figures at its top).  Not a test: it
# prints, and exits 0 whatever it measures; "below target" marks a figure that misses.
#   simulate    timeprest simulate -s timeprest -w 64 -n 32 -k 512 --format json (1,114,112 ops),
#               end to end, best of 5: >= 20 M operations/s
#   csv         timeprest schedule (the same) --format csv > /dev/null, best of 5: <= 0.15 s
#   validate    timeprest validate -w 2-64 -n 1-64 --format tsv, once: <= 10 s
#   plan        timeprest plan --model vgg16-cifar100 --cluster C --batch 128 -w 1-8, best of 3: <= 0.5 s
#   PyTorch     bench/peer-torch-sim.py --quick (N = 512) where PyTorch is installed (peer-torch-sim.sh makes a
#               venv): >= 100x its _simulate_comms_compute, makespans equal
# Usage: bench/quick.sh [BUILDDIR]
set -e
b=${1:-.}
tp="$b/timeprest"
ops=1114112

# best wall time in seconds of $1 runs of the rest
best_of() {
  n=$1
  shift
  best=""
  i=0
  while [ "$i" -lt "$n" ]; do
    s=$(date +%s%N)
    "$@" >/dev/null || true
    e=$(date +%s%N)
    t=$(((e - s) / 1000))
    if [ -z "$best" ] || [ "$t" -lt "$best" ]; then best=$t; fi
    i=$((i + 1))
  done
  awk -v us="$best" 'BEGIN { printf "%.3f", us / 1e6 }'
}

# line NAME FIGURE UNIT TARGET OP: OP is >= or <=
line() {
  verdict=$(awk -v f="$2" -v t="$4" -v op="$5" 'BEGIN { ok = op == ">=" ? f >= t : f <= t; print ok ? "ok" : "below target" }')
  printf '%-10s %10s %-10s target %s %s  %s\n' "$1" "$2" "$3" "$5" "$4" "$verdict"
}

echo "== bench-quick on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
t=$(best_of 5 "$tp" simulate -s timeprest -w 64 -n 32 -k 512 --format json)
line simulate "$(awk -v t="$t" -v n="$ops" 'BEGIN { printf "%.1f", n / t / 1e6 }')" "M ops/s" 20 ">="
t=$(best_of 5 "$tp" schedule -s timeprest -w 64 -n 32 -k 512 --format csv)
line csv "$t" s 0.15 "<="
t=$(best_of 1 "$tp" validate -w 2-64 -n 1-64 --format tsv)
line validate "$t" s 10 "<="
t=$(best_of 3 "$tp" plan --model vgg16-cifar100 --cluster C --batch 128 -w 1-8)
line plan "$t" s 0.5 "<="
here=$(cd "$(dirname "$0")" && pwd)
py=${TP_TORCH_PYTHON:-python3}
if "$py" -c "import torch.distributed.pipelining" 2>/dev/null; then
  "$py" -W ignore "$here/peer-torch-sim.py" "$tp" --quick | tail -n 1
else
  echo "PyTorch    skipped: no torch for $py (TP_TORCH_PYTHON=/path/to/python; bench/peer-torch-sim.sh makes a venv)"
fi
