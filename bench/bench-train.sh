#!/bin/sh
# bench-train.sh — training throughput of the executor on mlp-deep (batch 128, N = 4): W = 2 with
# timeprest and pipedream against -w 1 (plain mini-batch SGD), best of R runs of K mini-batches
# each, with the prediction error of the time per mini-batch.  Results: bench/RESULTS.md.
# Usage: bench/bench-train.sh [BUILDDIR [K [R [DATA]]]]
set -e
b=${1:-.}
k=${2:-100}
r=${3:-3}
data=${4:-}
dataopt=""
[ -n "$data" ] && dataopt="--data $data"
field() { sed -n "s/.*\"$1\": \\([-0-9.e+]*\\).*/\\1/p"; }
# the time_per_mini_batch of "predicted" / "measured" / "error", in that order
tpm() { grep -o '"time_per_mini_batch": [-0-9.e+]*' | sed -n "${1}p" | sed 's/.*: //'; }
best_run() { # preset workers → "samples/s predicted measured error" of the fastest of r runs
  best=""; line=""
  i=0
  while [ $i -lt "$r" ]; do
    out=$("$b/timeprest" train -s "$1" -w "$2" -n 4 --batch 128 -k "$k" --model mlp-deep $dataopt --format json -q)
    sps=$(echo "$out" | field samples_per_second)
    if [ -z "$best" ] || [ "$(echo "$sps > $best" | bc -l)" = 1 ]; then
      best=$sps
      line="$sps $(echo "$out" | tpm 1) $(echo "$out" | tpm 2) $(echo "$out" | tpm 3)"
    fi
    i=$((i + 1))
  done
  echo "$line"
}
echo "== mlp-deep, batch 128, N=4, K=$k mini-batches, best of $r; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
ref=$(best_run timeprest 1)
ref_sps=${ref%% *}
printf '%-14s %3s %12s %9s %14s %14s %8s\n' preset W samples/s speed-up "predicted s/mb" "measured s/mb" error
for cfg in "timeprest 1" "timeprest 2" "pipedream 2"; do
  set -- $cfg
  if [ "$2" = 1 ]; then res=$ref; else res=$(best_run "$1" "$2"); fi
  set -- $1 $2 $res
  printf '%-14s %3s %12.1f %8.2fx %14.5f %14.5f %+7.1f%%\n' "$1" "$2" "$3" "$(echo "$3 / $ref_sps" | bc -l)" "$4" "$5" \
    "$(echo "100 * $6" | bc -l)"
done
