#!/bin/sh
# run.sh — the benchmarks of bench/RESULTS.md: end-to-end `simulate` throughput and peak memory per
# operation, the event loop and the metrics alone, and the wall time of the validate sweep.
# Usage: bench/run.sh [BUILDDIR [REPS]]   (BUILDDIR holds timeprest and bench/bench-sim; default .;
#        SWEEP_REPS=n runs the sweep n times instead of 2)
set -e
b=${1:-.}
reps=${2:-5}
ops=1114112 # timeprest, W=64, N=32, K=512

# best wall time (s) of $reps runs of the command
best_of() {
  best=""
  i=0
  while [ $i -lt "$reps" ]; do
    s=$(date +%s.%N)
    "$@" >/dev/null
    e=$(date +%s.%N)
    t=$(echo "$e - $s" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
    i=$((i + 1))
  done
  echo "$best"
}

echo "== end to end: timeprest simulate -s timeprest -w 64 -n 32 -k 512 ($ops operations), best of $reps"
# wall, CPU (user + sys, less sensitive to other load) and peak memory, each the best of $reps runs
bw="" bc="" kb=""
i=0
while [ $i -lt "$reps" ]; do
  set -- $(/usr/bin/time -f '%e %U %S %M' "$b/timeprest" simulate -s timeprest -w 64 -n 32 -k 512 2>&1 >/dev/null | tail -n 1)
  c=$(echo "$2 + $3" | bc -l)
  if [ -z "$bw" ] || [ "$(echo "$1 < $bw" | bc -l)" = 1 ]; then bw=$1; fi
  if [ -z "$bc" ] || [ "$(echo "$c < $bc" | bc -l)" = 1 ]; then bc=$c; fi
  if [ -z "$kb" ] || [ "$4" -lt "$kb" ]; then kb=$4; fi
  i=$((i + 1))
done
t=$(best_of "$b/timeprest" simulate -s timeprest -w 64 -n 32 -k 512)
printf 'simulate wall      %8.3f s  %8.2f M ops/s  (date-to-date; /usr/bin/time: %.2f s)\n' "$t" \
  "$(echo "$ops / $t / 1000000" | bc -l)" "$bw"
printf 'simulate CPU       %8.3f s  user + sys\n' "$bc"
printf 'simulate peak RSS  %8.1f MB  %8.1f bytes/op\n' "$(echo "$kb / 1024" | bc -l)" "$(echo "$kb * 1024 / $ops" | bc -l)"
kb=$(/usr/bin/time -f %M "$b/timeprest" schedule -s timeprest -w 64 -n 32 -k 512 --format csv 2>&1 >/dev/null | tail -n 1)
printf 'schedule peak RSS  %8.1f MB  %8.1f bytes/op (csv output included)\n' "$(echo "$kb / 1024" | bc -l)" \
  "$(echo "$kb * 1024 / $ops" | bc -l)"

echo "== the parts alone (one core): bench-sim timeprest 64 32 512 $reps"
"$b/bench/bench-sim" timeprest 64 32 512 "$reps"

reps=${SWEEP_REPS:-2}
echo "== validate -w 2-64 -n 1-64 (wall time, best of $reps)"
t=$(best_of "$b/timeprest" validate -w 2-64 -n 1-64 --format tsv)
printf 'validate sweep     %8.3f s\n' "$t"
echo "== training throughput, mlp-deep (bench/bench-train.sh)"
sh "$(dirname "$0")/bench-train.sh" "$b" 100 3
echo "== GEMM efficiency of the layers, cpu backend, batch 128 (thread CPU time)"
"$b/bench/bench-gemm" mlp 128 30
"$b/bench/bench-gemm" cnn 128 12
