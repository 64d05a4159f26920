#!/bin/sh
# prediction.sh — how well the simulator predicts a real run for W <= cores: mlp-deep and cnn,
# W in {1, 2}, several presets, N = 4, batch 128, K mini-batches; every run's JSON report goes to
# OUTDIR with the load average before it, and bench/prediction-table.py prints the predicted and
# measured time per mini-batch, their relative error, and predicted vs measured busy time per stage
# (busy is the sum of operation times: where it is off, the operations themselves ran slower than
# profiled; where only the time per mini-batch is off, the waiting was).  Not part of `make check`.
# Usage: bench/prediction.sh [BUILDDIR [OUTDIR [K]]]
set -e
b=${1:-.}
out=${2:-bench/results/prediction}
k=${3:-30}
mkdir -p "$out"
: > "$out/loadavg.txt"
for m in mlp-deep cnn; do
  for cfg in "gpipe 1" "timeprest 1" "pipedream 1" "gpipe 2" "1f1b 2" "pipedream 2" "timeprest 2" "i-timeprest 2"; do
    set -- $cfg
    tag="$m-$1-w$2"
    echo "$tag $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/loadavg.txt"
    "$b/timeprest" train --model "$m" -s "$1" -w "$2" -n 4 --batch 128 -k "$k" -q --format json -o "$out/$tag.json"
  done
done
python3 "$(dirname "$0")/prediction-table.py" "$out"
