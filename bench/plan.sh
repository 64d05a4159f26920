#!/bin/sh
# plan.sh — the plan search's benchmarks (issue: timeprest plan): (1) the search's wall time over
# every preset x W 1..8 x N in the divisors of 128 x recompute (no, yes) on VGG-16 (ImageNet) on
# cluster C, best of R, and the same without the recompute dimension;
# (2) a measured profile of mlp-deep (batch 128) and plan -w 1-4 --run-top 3 on this machine:
# each run's measured time per mini-batch against its prediction, Kendall's tau and whether the top
# choice is measured fastest (each plan 3 runs interleaved, the median; about 1 s of steady state a
# run: plan's defaults).  Results: bench/RESULTS.md ("The plan search").
# Usage: bench/plan.sh [BUILDDIR [R [OUTDIR [search]]]]   (search: only (1))
set -e
b=${1:-.}
r=${2:-3}
out=${3:-$(mktemp -d)}
mkdir -p "$out"
tp="$b/timeprest"
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# search RECOMPUTE NAME: the best wall time of R searches and the counts of the last
search() {
  echo "== plan: vgg16-imagenet on cluster C, batch 128, every preset, W 1-8, N dividing 128, --recompute $1 (best of $r)"
  best=""
  i=0
  while [ $i -lt "$r" ]; do
    s=$(date +%s.%N)
    "$tp" plan --model vgg16-imagenet --cluster C --batch 128 -w 1-8 --recompute "$1" > "$out/$2"
    e=$(date +%s.%N)
    t=$(echo "$e - $s" | bc)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc)" = 1 ]; then best=$t; fi
    i=$((i + 1))
  done
  sed -n 3p "$out/$2"
  echo "wall: best $best s"
}
search both plan-vgg16-C-recompute.txt
search no plan-vgg16-C.txt
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "${4:-}" = search ] && exit 0
echo "== profile: mlp-deep, batch 128 (its divisors), 5 repetitions"
"$tp" profile --model mlp-deep --batch 128 -r 5 -o "$out/mlp-deep.profile"
echo "== plan --run-top 3: mlp-deep, batch 128, W 1-4, every preset"
"$tp" plan --model mlp-deep --profile "$out/mlp-deep.profile" --batch 128 -w 1-4 --run-top 3 | sed -n '/^Top choice/,$p'
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "outputs in $out"
