#!/bin/sh
# convergence-plot.sh — the convergence pictures of docs/findings.md from bench/convergence.sh's and
# bench/claims.sh's training logs: each run's rows copied under the run's short name, drawn by
# `timeprest plot convergence`.  By default the per-epoch rows (test = 1: test accuracy left, the
# epoch's mean training loss right); with ROWS=train the rows logged during training (training
# accuracy every 50 mini-batches, x the fractional epoch) and the accuracy alone, so that a run whose
# loss explodes does not flatten the others.
# Usage: [ROWS=train] bench/convergence-plot.sh BUILDDIR DIR OUTPUT.png TITLE NAME=LOG... (LOG relative to DIR)
set -e
b=$1; d=$2; png=$3; title=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=""
for spec in "$@"; do
  name=${spec%%=*}
  log=${spec#*=}
  if [ "${ROWS:-test}" = train ]; then
    awk -F, 'NR == 1 { print "epoch,accuracy" } NR > 1 && $6 == 0 { print $1 "," $5 }' "$d/$log" > "$tmp/$name.csv"
  else
    awk -F, 'NR == 1 || $6 == 1' "$d/$log" > "$tmp/$name.csv"
  fi
  args="$args -i $tmp/$name.csv"
done
if [ "${ROWS:-test}" = train ]; then
  # shellcheck disable=SC2086 # a list of options
  "$b/timeprest" plot convergence $args --y accuracy --title "$title" -o "$png"
else
  # shellcheck disable=SC2086
  "$b/timeprest" plot convergence $args --y accuracy --y2 loss --title "$title" -o "$png"
fi
