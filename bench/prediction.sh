#!/bin/sh
# prediction.sh — how well the simulator predicts a real run for W <= cores: mlp-deep and cnn,
# W = 1 (gpipe, timeprest, pipedream) and W = 2 (every preset of PRESETS), N = 4, batch 128, K
# mini-batches, without and with --recompute (RECOMPUTE); every run's JSON report goes to
# OUTDIR with the load average before it, and bench/prediction-table.py prints the predicted and
# measured time per mini-batch, their relative error, and predicted vs measured busy time per stage
# (busy is the sum of operation times: where it is off, the operations themselves ran slower than
# profiled; where only the time per mini-batch is off, the waiting was).  Not part of `make check`.
# Usage: bench/prediction.sh [BUILDDIR [OUTDIR [K]]]
#   env: BATCH=128, ARGS='' (more train options, e.g. --optimizer adamw), MODELS='mlp-deep cnn' RECOMPUTE='0 1' PRESETS='gpipe 1f1b pipedream pipedream-2bw timeprest
#        v-timeprest i-timeprest timeprest-stash timeprest-1f1b zb-h1 zb-h2'  (a refused pair is said and skipped)
set -e
b=${1:-.}
out=${2:-bench/results/prediction}
k=${3:-30}
mkdir -p "$out"
: > "$out/loadavg.txt"
presets=${PRESETS:-gpipe 1f1b pipedream pipedream-2bw timeprest v-timeprest i-timeprest timeprest-stash timeprest-1f1b zb-h1 zb-h2}
cfgs="gpipe:1 timeprest:1 pipedream:1"
for p in $presets; do cfgs="$cfgs $p:2"; done
for m in ${MODELS:-mlp-deep cnn}; do
  for rc in ${RECOMPUTE:-0 1}; do
    rcopt=""
    [ "$rc" = 1 ] && rcopt="--recompute"
    for cfg in $cfgs; do
      p=${cfg%:*} w=${cfg#*:}
      tag="$m-$p-w$w-rc$rc"
      echo "$tag $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/loadavg.txt"
      # shellcheck disable=SC2086 # $rcopt, $ARGS: options or nothing
      "$b/timeprest" train --model "$m" -s "$p" -w "$w" -n 4 --batch "${BATCH:-128}" -k "$k" $rcopt $ARGS -q --format json \
        -o "$out/$tag.json" 2> "$out/$tag.err" || echo "$tag: $(cat "$out/$tag.err")" # refused (zb with --recompute)
      rm -f "$out/$tag.err"
    done
  done
done
python3 "$(dirname "$0")/prediction-table.py" "$out"
