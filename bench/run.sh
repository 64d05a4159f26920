#!/bin/sh
# run.sh — the benchmarks of bench/RESULTS.md: simulator throughput, the validate sweep time and the
# GEMM efficiency of the executor's layers.
# Usage: bench/run.sh BUILDDIR
set -e
b=${1:-.}
echo "== simulated operations per second (one core), timeprest W=64 N=32 K=512"
"$b/bench/bench-sim" timeprest 64 32 512 5
echo "== validate -w 2-32 -n 2-32 (wall time, best of 3)"
best=""
for i in 1 2 3; do
  s=$(date +%s.%N)
  "$b/timeprest" validate -w 2-32 -n 2-32 --format tsv >/dev/null
  e=$(date +%s.%N)
  t=$(echo "$e - $s" | bc -l)
  if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
done
printf 'validate sweep     %8.3f s\n' "$best"
echo "== GEMM efficiency of the layers, cpu backend, batch 128 (thread CPU time)"
"$b/bench/bench-gemm" mlp 128 30
"$b/bench/bench-gemm" cnn 128 12
