#!/bin/sh
# bench-train.sh — training throughput of the executor on mlp-deep (batch 128, N = 4): W = 2 with
# timeprest and pipedream against -w 1 (one stage: plain mini-batch SGD) of the same preset and
# against the faster -w 1, best of R runs of K mini-batches each, with the prediction error of the
# time per mini-batch.  Results: bench/RESULTS.md.
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
echo "   speed-up: against -w 1 of the same preset (timeprest -w 1 runs micro-batches of 32, pipedream -w 1 the"
echo "   whole mini-batch of 128 at once) and against the faster of the two -w 1 runs"
printf '%-14s %3s %12s %9s %9s %14s %14s %8s\n' preset W samples/s "vs own" "vs best" "predicted s/mb" "measured s/mb" error
rt=$(best_run timeprest 1)
rp=$(best_run pipedream 1)
ref_t=${rt%% *}
ref_p=${rp%% *}
best=$ref_t
[ "$(echo "$ref_p > $best" | bc -l)" = 1 ] && best=$ref_p
for cfg in "timeprest 1" "pipedream 1" "timeprest 2" "pipedream 2"; do
  set -- $cfg
  case "$1 $2" in
    "timeprest 1") res=$rt ;;
    "pipedream 1") res=$rp ;;
    *) res=$(best_run "$1" "$2") ;;
  esac
  own=$ref_t
  [ "$1" = pipedream ] && own=$ref_p
  set -- $1 $2 $res
  printf '%-14s %3s %12.1f %8.2fx %8.2fx %14.5f %14.5f %+7.1f%%\n' "$1" "$2" "$3" "$(echo "$3 / $own" | bc -l)" \
    "$(echo "$3 / $best" | bc -l)" "$4" "$5" "$(echo "100 * $6" | bc -l)"
done
