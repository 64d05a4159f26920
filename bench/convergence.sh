#!/bin/sh
# convergence.sh — the convergence grid of the executor on Fashion-MNIST: `mlp` with every preset,
# W in {2, 4}, N in {2, 4}, E_MLP epochs; `cnn` with gpipe, pipedream and the TiMePReSt family at
# W = 4, N in {2, 4}, E_CNN epochs; TiMePReSt with its order fixed on unit slots (--order-from
# slots: v = 2 at W = 4, N = 2, where the order fixed on the profiled costs may give another v) on
# both models at W = 4, to measure what the multiple-sequence problem does; and plain SGD on `cnn`
# for E_LONG epochs, to see where the synchronous presets end.  Every run writes its training log
# (--csv) and its JSON report to OUTDIR; bench/convergence-table.py turns the JSONs into the
# Markdown table of bench/RESULTS.md.  Runs already present in OUTDIR are skipped, so the script
# can be resumed.  Not part of `make check`.
# Usage: bench/convergence.sh [BUILDDIR [OUTDIR]]   (env: E_MLP=10 E_CNN=5 ONLY=mlp|cnn|slots|long E_LONG=12 DATA=DIR
#        ARGS='--lr 0.02 --lr-schedule cosine': more options for every run)
set -e
b=${1:-.}
out=${2:-bench/results/convergence}
e_mlp=${E_MLP:-10}
e_cnn=${E_CNN:-5}
dataopt=""
[ -n "$DATA" ] && dataopt="--data $DATA"
mkdir -p "$out"
. "$(dirname "$0")/train-run.sh"
run() { # model preset W N epochs [order-from]
  orderopt=""
  [ -n "$6" ] && orderopt="--order-from $6"
  # shellcheck disable=SC2086 # $orderopt: none or one option with its value
  run_train "$1-$2-w$3-n$4-e$5${6:+-$6}" --model "$1" -s "$2" -w "$3" -n "$4" --epochs "$5" $orderopt
}
if [ -z "$ONLY" ] || [ "$ONLY" = mlp ]; then
  for w in 2 4; do for n in 2 4; do
    for p in gpipe 1f1b pipedream pipedream-2bw timeprest v-timeprest i-timeprest; do
      run mlp "$p" "$w" "$n" "$e_mlp"
    done
  done; done
fi
if [ -z "$ONLY" ] || [ "$ONLY" = cnn ]; then
  for n in 2 4; do
    for p in gpipe timeprest pipedream v-timeprest i-timeprest; do
      run cnn "$p" 4 "$n" "$e_cnn"
    done
  done
fi
if [ -z "$ONLY" ] || [ "$ONLY" = slots ]; then
  for n in 2 4; do
    run mlp timeprest 4 "$n" "$e_mlp" slots
    run cnn timeprest 4 "$n" "$e_cnn" slots
  done
fi
if [ -z "$ONLY" ] || [ "$ONLY" = long ]; then
  # the synchronous reference for longer: plain SGD (GPipe on one stage computes what GPipe on W does)
  run cnn gpipe 1 1 "${E_LONG:-12}"
fi
