#!/bin/sh
# llama-findings.sh — the language-model grid of docs/findings.md: llama-tiny on the default corpus
# (the fortunes package's texts) at W = 4 with N = 3 and N = 4, AdamW with a linear warm-up then a
# cosine decay, every preset (gpipe, 1f1b, zb-h1, pipedream, timeprest, v-timeprest, i-timeprest),
# with and without --recompute (zb-h1: a split backward is not recomputed), seeds 1, 2 and 3.  Every
# run writes its log and JSON report to OUTDIR (resumable: runs already there are skipped);
# bench/llama-findings.py turns them into the table and the loss-curve picture.  Not part of `make check`.
# Usage: bench/llama-findings.sh [BUILDDIR [OUTDIR]]   (env: K mini-batches, default 120; B batch, default 12)
set -e
b=${1:-.}
out=${2:-bench/results/llama-findings}
k=${K:-120}
batch=${B:-12}
dataopt=""
mkdir -p "$out"
. "$(dirname "$0")/train-run.sh"
for seed in 1 2 3; do
  for n in 4 3; do
    for p in gpipe 1f1b zb-h1 pipedream timeprest v-timeprest i-timeprest; do
      for rc in no yes; do
        [ "$p" = zb-h1 ] && [ "$rc" = yes ] && continue
        run_train "$p-n$n-rc$rc-s$seed" -m llama-tiny -s "$p" -w 4 -n "$n" -k "$k" --batch "$batch" --seed "$seed" \
          --optimizer adamw --lr-schedule warmup-cosine --profile-reps 1 $([ "$rc" = yes ] && echo --recompute)
      done
    done
  done
done
