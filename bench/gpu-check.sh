#!/bin/sh
# gpu-check.sh — the one prepared run for a machine with a GPU (not run in CI): configure with CUDA
# required, build, run tests/test-backend (the cuda-vs-cpu parity cases must run, not skip) and
# tests/test-nccl, time each layer of mlp and cnn on cpu and cuda, then train on one GPU:
#  - mlp and cnn, W = 1, 2, 4 stages (every stage its own cuda instance and stream on GPU 0), on
#    synthetic data and on Fashion-MNIST when installed, K mini-batches (default 200) each, with the
#    same seed on --backend cpu and --backend cuda: final training loss within TOL (relative,
#    default 0.05), versions_match on both, samples/s of both;
#  - the GPU run's time per mini-batch measured against the executor's prediction from its own
#    profiled costs, and beside them the simulator's analytic prediction of the same schedule, model
#    and split on models/clusters/h200.cluster;
#  - determinism: two cuda runs with one seed give the same weights_sha256; after 20 mini-batches the
#    cuda loss is within 1e-3 (relative) of the cpu loss.
# Every run takes the published unit-slot order (--order-from slots), so that cpu and cuda run the
# same schedule (an order fixed on each backend's own profiled costs could differ, and so would
# the weights).  A short table comes last; the exit status is 1 when a check failed.  Runs are skipped (and say
# so) once 420 s have passed, so that the whole stays under 8 minutes.
# Usage: bench/gpu-check.sh [BUILDDIR]   (default: the source tree if configured there, else _gpu)
# Environment: K (mini-batches per training run), TOL, FMNIST (Fashion-MNIST directory), PRESET
# (default timeprest), LR (default 0.001: at 0.01 the cnn diverges on synthetic data under the
# stale-weight presets at W = 4, and a diverging run compares nothing);
# DRY=1 checks the script itself where there is no GPU: no parity or layer steps, and the "gpu"
# runs use the cpu backend (numbers then mean nothing about GPUs).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
if [ -f "$src/config.status" ]; then
  build=${1:-$src}
else
  build=${1:-$src/_gpu}
fi
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
start=$(date +%s)
step() { printf '== %s (%ss)\n' "$1" "$(($(date +%s) - start))"; }

step "device"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
else
  echo "nvidia-smi not found" >&2
fi

step "configure and build ($build)"
[ -x "$src/configure" ] || (cd "$src" && autoreconf -fi)
mkdir -p "$build"
cd "$build"
if [ ! -f config.status ] || ! grep -q '^#define HAVE_CUDA 1' config.h 2>/dev/null; then
  "$src/configure" -q --with-cuda
fi
make -j"$jobs" >/dev/null
make -j"$jobs" tests/test-backend tests/test-nccl bench/bench-layers >/dev/null

DRY=${DRY:-0}
gpu=cuda
log=
if [ "$DRY" = 1 ]; then
  gpu=cpu
  echo "DRY=1: no GPU steps; the \"gpu\" runs below use the cpu backend"
else
step "parity: tests/test-backend"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! G_DEBUG=fatal-warnings ./tests/test-backend >"$log" 2>&1; then
  grep -v '^ok' "$log" >&2
  echo "gpu-check: tests/test-backend failed" >&2
  exit 1
fi
if grep -q '# SKIP' "$log"; then
  grep '# SKIP' "$log" | head -3 >&2
  echo "gpu-check: the cuda cases were skipped: no usable GPU" >&2
  exit 1
fi
echo "$(grep -c '^ok' "$log") cases passed, none skipped"

step "nccl transport: tests/test-nccl (two ranks need two GPUs: one GPU skips that case)"
G_DEBUG=fatal-warnings ./tests/test-nccl 2>&1 | grep -v '^#' || { echo "gpu-check: tests/test-nccl failed" >&2; exit 1; }

step "layers: forward + backward at batch 128, cpu vs cuda"
for model in mlp cnn; do
  ./bench/bench-layers "$model" 128 10 cpu cuda
  echo
done
fi # DRY

K=${K:-200}
PRESET=${PRESET:-timeprest}
LR=${LR:-0.001}
TOL=${TOL:-0.05}
FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
budget=420
fail=0
tmp=$(mktemp -d)
trap 'rm -f ${log:+"$log"}; rm -rf "$tmp"' EXIT
table="$tmp/table"
: >"$table"

# field NAME FILE: a top-level number or word of a train/simulate JSON report
field() { sed -n "s/.*\"$1\": \([^,}]*\).*/\1/p" "$2" | head -n 1 | tr -d '"'; }
# nested OBJ FILE: time_per_mini_batch inside the object "OBJ": {…}
nested() { sed -n "s/.*\"$1\": {\"time_per_mini_batch\": \([^,}]*\).*/\1/p" "$2" | head -n 1; }
# split FILE: layers per stage of a train report, e.g. 2,5
split() { grep -o '"first_layer": [0-9]*, "last_layer": [0-9]*' "$1" | awk -F'[:,]' '{ printf "%s%d", (NR > 1 ? "," : ""), $4 - $2 + 1 }'; }
late() { [ $(($(date +%s) - start)) -ge "$budget" ]; }
# train NAME BACKEND MODEL DATA W K [extra…]: the JSON report in $tmp/NAME.json; FALSE on failure
train() {
  n=$1 be=$2 m=$3 d=$4 w=$5 k=$6
  shift 6
  if ! timeout 150 ./timeprest train -q -f json --backend "$be" -m "$m" --data "$d" -w "$w" -n 4 -b 128 -k "$k" \
      -s "$PRESET" --order-from slots --lr "$LR" --seed 7 "$@" >"$tmp/$n.json" 2>"$tmp/$n.err"; then
    echo "gpu-check: train $n failed: $(tail -n 2 "$tmp/$n.err")" >&2
    fail=1
    return 1
  fi
}


step "training: cpu vs cuda, W = 1, 2, 4 on one GPU, $K mini-batches each"
datas=synthetic
if [ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || [ -f "$FMNIST/train-images-idx3-ubyte" ]; then
  datas="synthetic $FMNIST"
else
  echo "Fashion-MNIST not found in $FMNIST: synthetic data only"
fi
for m in mlp cnn; do
  for d in $datas; do
    dn=$([ "$d" = synthetic ] && echo synth || echo fmnist)
    for w in 1 2 4; do
      row="$m $dn $w"
      if late; then
        echo "$row skipped (time)" >>"$table"
        continue
      fi
      train "$m-$dn-$w-cpu" cpu "$m" "$d" "$w" "$K" || { echo "$row cpu-failed" >>"$table"; continue; }
      train "$m-$dn-$w-cuda" "$gpu" "$m" "$d" "$w" "$K" || { echo "$row cuda-failed" >>"$table"; continue; }
      c="$tmp/$m-$dn-$w-cpu.json" g="$tmp/$m-$dn-$w-cuda.json"
      sim="$tmp/$m-$w-sim.json"
      if ! ./timeprest simulate -s "$PRESET" --order-from slots -m "$m" --cluster h200 -w "$w" -n 4 -b 128 -k "$K" \
          --split "$(split "$g")" -f json >"$sim" 2>"$tmp/sim.err"; then
        echo "gpu-check: simulate $m W=$w on h200 failed: $(tail -n 1 "$tmp/sim.err")" >&2
        : >"$sim"
      fi
      echo "$row $(field samples_per_second "$c") $(field samples_per_second "$g") $(field final_train_loss "$c")" \
        "$(field final_train_loss "$g") $(field versions_match "$c")/$(field versions_match "$g")" \
        "$(nested measured "$g") $(nested predicted "$g") $(field time_per_mini_batch "$sim")" >>"$table"
      echo "  $row: done ($(($(date +%s) - start))s)"
    done
  done
done

step "determinism: cuda twice with one seed; cuda vs cpu after 20 mini-batches"
det="skipped (time)"
if ! late && train det-cpu cpu mlp synthetic 4 20 && train det-a "$gpu" mlp synthetic 4 20 &&
    train det-b "$gpu" mlp synthetic 4 20; then
  sa=$(field weights_sha256 "$tmp/det-a.json") sb=$(field weights_sha256 "$tmp/det-b.json")
  lc=$(field final_train_loss "$tmp/det-cpu.json") lg=$(field final_train_loss "$tmp/det-a.json")
  same=$([ "$sa" = "$sb" ] && echo yes || echo NO)
  rel=$(awk -v a="$lc" -v b="$lg" 'BEGIN { d = (b - a) / (a != 0 ? a : 1); printf "%.2e", d < 0 ? -d : d }')
  det="same weights_sha256 over two cuda runs: $same; loss after 20: cpu $lc, cuda $lg (rel. diff $rel, limit 1e-3)"
  [ "$same" = yes ] || fail=1
  awk -v r="$rel" 'BEGIN { exit !(r <= 1e-3) }' || fail=1
fi

step "done"
echo
echo "Training on one GPU: -s $PRESET, batch 128, N = 4, $K mini-batches, --lr $LR, seed 7; s/mb: seconds per"
echo "mini-batch (measured on the GPU; predicted from the profiled costs; the h200 cluster's analytic model)"
awk -v tol="$TOL" '
  BEGIN { printf "%-4s %-6s %2s | %9s %9s %6s | %8s %8s %7s %-10s | %9s %9s %6s %9s\n", "model", "data", "W",
          "cpu smp/s", "gpu smp/s", "gpu/x", "cpu loss", "gpu loss", "rel", "versions", "gpu s/mb", "profiled", "err", "h200 sim" }
  NF < 7 { printf "%-4s %-6s %2s | %s\n", $1, $2, $3, $4 " " $5; bad = bad || $4 != "skipped"; next }
  { rel = ($7 - $6) / ($6 != 0 ? $6 : 1); if (rel < 0) rel = -rel
    ok = rel <= tol && $8 == "true/true"; bad = bad || !ok
    printf "%-4s %-6s %2s | %9.0f %9.0f %6.2f | %8.4f %8.4f %7.4f %-10s | %9.3e %9.3e %+5.0f%% %9.3e%s\n", $1, $2, $3,
           $4, $5, ($4 > 0 ? $5 / $4 : 0), $6, $7, rel, $8, $9, $10, ($9 > 0 ? 100 * ($10 - $9) / $9 : 0),
           ($11 == "" ? 0 : $11), (ok ? "" : "  <- FAIL") }
  END { exit bad }' "$table" || fail=1
echo "$det"
if [ "$fail" -ne 0 ]; then
  echo "gpu-check: FAILED (see above)" >&2
  exit 1
fi
echo "gpu-check: all checks passed"
