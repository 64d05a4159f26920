#!/bin/sh
# convergence-plot.sh — the convergence pictures of docs/findings.md from bench/convergence.sh's training logs:
# each run's per-epoch rows (test = 1: test accuracy and the epoch's mean training loss) copied
# under the run's short name, drawn by `timeprest plot convergence` (accuracy left, loss right).
# Usage: bench/convergence-plot.sh BUILDDIR DIR OUTPUT.png TITLE NAME=LOG... (LOG relative to DIR)
set -e
b=$1; d=$2; png=$3; title=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=""
for spec in "$@"; do
  name=${spec%%=*}
  log=${spec#*=}
  awk -F, 'NR == 1 || $6 == 1' "$d/$log" > "$tmp/$name.csv"
  args="$args -i $tmp/$name.csv"
done
"$b/timeprest" plot convergence $args --y accuracy --y2 loss --title "$title" -o "$png"
