#!/bin/sh
# claims.sh — the papers' claims measured at their own configuration: W = 4, N = 3 (v = 1 on the
# published unit-slot order; batch 120, a multiple of 3 near the default 128), `mlp` for E_MLP epochs
# and `cnn` for E_CNN epochs, the nf1b order fixed on unit slots and on the profiled costs, without and
# with --recompute, lr in LRS x momentum in MOMS, presets gpipe (the synchronous reference at each
# setting), pipedream, timeprest, v-timeprest and i-timeprest with each significance function; and
# `mlp-deep` at W = 4, N = 4 (its split puts parameters upstream on every stage) for E_DEEP epochs.
# One seed a grid (SEED, default 1; a run of another seed is tagged -seedS).  Every run writes its
# training log and JSON report to OUTDIR
# (bench/train-run.sh: runs already there are skipped, so the grid can be resumed);
# `bench/convergence-table.py --claims OUTDIR` makes the table and counts where each claim holds.
# Not part of `make check`; the whole grid takes days on 2 cores: narrow it with the variables.
# Usage: bench/claims.sh [BUILDDIR [OUTDIR]]
#   env: MODELS='mlp cnn mlp-deep' E_MLP=10 E_CNN=5 E_DEEP=5 ORDERS='slots costs' RECOMPUTE='0 1'
#        LRS='0.005 0.01 0.02 0.05' MOMS='0 0.9' PRESETS='gpipe pipedream timeprest v-timeprest i-timeprest'
#        SIGS='exp linear const:0.5' BATCH=120 BATCH_DEEP=128 SEED=1 DATA=DIR ARGS='more options for every run'
#        TARGETS=FILE (only the runs it lists: bench/claims-targets-*.txt, the settings within noise on seed 1)
set -e
b=${1:-.}
out=${2:-bench/results/claims}
dataopt=""
seed=${SEED:-1}
seedtag=""
[ "$seed" != 1 ] && seedtag="-seed$seed"
[ -n "$DATA" ] && dataopt="--data $DATA"
mkdir -p "$out"
. "$(dirname "$0")/train-run.sh"
# shellcheck disable=SC2086
first_order=$(set -- ${ORDERS:-slots costs}; echo "$1")
for model in ${MODELS:-mlp cnn mlp-deep}; do
  case $model in
  mlp) e=${E_MLP:-10} n=3 batch=${BATCH:-120} ;;
  cnn) e=${E_CNN:-5} n=3 batch=${BATCH:-120} ;;
  *) e=${E_DEEP:-5} n=4 batch=${BATCH_DEEP:-128} ;;
  esac
  for rc in ${RECOMPUTE:-0 1}; do
    rcopt=""
    [ "$rc" = 1 ] && rcopt="--recompute"
    for lr in ${LRS:-0.005 0.01 0.02 0.05}; do for mom in ${MOMS:-0 0.9}; do
      for order in ${ORDERS:-slots costs}; do
        for p in ${PRESETS:-gpipe pipedream timeprest v-timeprest i-timeprest}; do
          # gpipe's order does not depend on costs: one run per setting, under the first order
          [ "$p" = gpipe ] && [ "$order" != "$first_order" ] && continue
          sigs="-"
          [ "$p" = i-timeprest ] && sigs=${SIGS:-exp linear const:0.5}
          for sig in $sigs; do
            sigopt="" sigtag=""
            [ "$sig" != - ] && sigopt="--significance $sig" sigtag="-s$(echo "$sig" | tr ':' '_')"
            oopt="--order-from $order" otag="-$order"
            [ "$p" = gpipe ] && oopt="" otag=""
            # shellcheck disable=SC2086 # option lists
            run_train "$model-$p$sigtag-w4-n$n-e$e$otag-rc$rc-lr$lr-m$mom$seedtag" --model "$model" -s "$p" -w 4 -n "$n" \
              --batch "$batch" --epochs "$e" --seed "$seed" --lr "$lr" --momentum "$mom" $oopt $rcopt $sigopt
          done
        done
      done
    done; done
  done
done
