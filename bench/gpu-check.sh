#!/bin/sh
# gpu-check.sh — the one prepared run for a machine with a GPU (issue 9; not run in CI):
#  1. build with CUDA (configure --with-cuda: fails without nvcc and cuBLAS);
#  2. parity: tests/test-backend, whose cuda-vs-cpu cases must run, not skip;
#  3. NCCL: tests/test-nccl (its two-rank exchange needs two GPUs and says so on one);
#  4. the SGEMM rate of the cnn's and vgg16-cifar100's layers on the cuda backend against cuBLAS's
#     own on the same shapes (bench/bench-gemm-cuda);
#  5. on one GPU with W = 4 stages (each its own cuda instance and stream), for gpipe, pipedream and
#     timeprest: the cnn on Fashion-MNIST for one epoch, and vgg16-cifar100 on synthetic data of its
#     shape for 50 mini-batches (batch 128, N = 4, seed 7, the unit-slot order so that the h200
#     simulation runs the same schedule);
#  6. determinism: two cuda runs with one seed give one weights_sha256, and after 20 mini-batches
#     the cuda loss is within 1e-3 (relative) of the cpu loss.
# One short table comes last: samples/s; the time per mini-batch measured against its predictions
# from the profiled costs (train's own) and from the h200 cluster's analytic model (`simulate
# --cluster h200` with the run's split); peak memory per stage (the weight store's) and per GPU
# (cudaMemGetInfo's most in use); the layers' SGEMM rate against cuBLAS.  Every step prints the
# elapsed time; the first error ends the script (exit 1).  Estimated on an H200 (16 cores): build
# 2 min (nvcc), tests 0.5 min, GEMM 0.5 min, cnn 3 x 0.5 min, vgg16 3 x 0.5 min, determinism
# 0.5 min: about 6 of the 8 minutes allowed.
# What the machine must have (checked first, in seconds, all missing items named at once): a C
# compiler, make, pkg-config with glib-2.0, gmodule-2.0 and json-glib-1.0 (>= 2.70 / 1.6), zlib and
# OpenBLAS (cblas.h) headers, nvcc and cuBLAS under /usr/local/cuda (or on PATH), autoreconf when
# the tree has no configure script, timeout, and (without DRY) the Fashion-MNIST files; mpicc and
# NCCL are optional (without them the NCCL transport is not built).  A bare CUDA image lacks the
# GLib, json-glib and OpenBLAS development files: install or carry them before the run.
# Usage: bench/gpu-check.sh [BUILDDIR]   (default: the source tree if configured there, else _gpu)
# Environment: FMNIST (Fashion-MNIST directory), DRY=1 checks the script itself where there is no
# GPU: no parity, NCCL or cuBLAS steps, the "gpu" runs on the cpu backend at tiny sizes (the numbers
# then say nothing about GPUs).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
if [ -f "$src/config.status" ]; then
  build=${1:-$src}
else
  build=${1:-$src/_gpu}
fi
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
DRY=${DRY:-0}
FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
start=$(date +%s)
last=$start
step() {
  now=$(date +%s)
  printf '== [%4ss, previous step %ss] %s\n' "$((now - start))" "$((now - last))" "$1"
  last=$now
}
die() { echo "gpu-check: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$DRY" = 1 ]; then
  gpu=cpu W=4 B=8 N=4 CNN_RUN="-k 6" VGG_K=2 VGG_B=4 VGG_DATA=synthetic:64:16 DET_K=4 GEMM_B=8
  echo "DRY=1: no GPU steps; the \"gpu\" runs use the cpu backend at tiny sizes"
else
  gpu=cuda W=4 B=128 N=4 CNN_RUN="--epochs 1" VGG_K=50 VGG_B=128 VGG_DATA=synthetic:6400:1024 DET_K=20 GEMM_B=128
fi

step "device"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
else
  echo "nvidia-smi not found"
fi

step "what the build and the runs need"
missing=""
lack() { missing="$missing
  - $*"; }
have() { command -v "$1" >/dev/null 2>&1; }
have "${CC:-cc}" || have gcc || lack "a C compiler (cc or gcc)"
have make || lack "make"
have timeout || lack "timeout (coreutils)"
[ -x "$src/configure" ] || have autoreconf || lack "autoreconf (autoconf, automake): the tree has no configure script"
if have pkg-config; then
  for pc in "glib-2.0 >= 2.70" "gmodule-2.0 >= 2.70" "json-glib-1.0 >= 1.6"; do
    pkg-config --exists "$pc" || lack "$pc (pkg-config finds no such development files)"
  done
else
  lack "pkg-config (and through it glib-2.0, gmodule-2.0, json-glib-1.0)"
fi
inc() { for d in /usr/include /usr/local/include /usr/include/x86_64-linux-gnu /usr/include/openblas; do
  [ -f "$d/$1" ] && return 0; done; pkg-config --cflags openblas 2>/dev/null | grep -q .; }
inc zlib.h || lack "zlib.h (zlib development files)"
inc cblas.h || lack "cblas.h (OpenBLAS development files)"
if [ "$DRY" != 1 ]; then
  have nvcc || [ -x /usr/local/cuda/bin/nvcc ] || lack "nvcc (CUDA toolkit)"
  [ -f /usr/local/cuda/include/cublas_v2.h ] || lack "/usr/local/cuda/include/cublas_v2.h (cuBLAS)"
  [ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || [ -f "$FMNIST/train-images-idx3-ubyte" ] ||
    lack "Fashion-MNIST in $FMNIST (set FMNIST to a directory holding train-images-idx3-ubyte.gz and the rest)"
  have mpicc && [ -f /usr/local/cuda/include/nccl.h ] ||
    echo "(no mpicc or no nccl.h: the NCCL transport is not built; its tests only check the refusal)"
fi
[ -z "$missing" ] || die "this machine lacks what the check needs:$missing"
echo "all found"

step "configure and build with CUDA ($build)"
[ -x "$src/configure" ] || (cd "$src" && autoreconf -fi)
mkdir -p "$build"
cd "$build"
if [ ! -f config.status ] || { [ "$DRY" != 1 ] && ! grep -q '^#define HAVE_CUDA 1' config.h 2>/dev/null; }; then
  if [ "$DRY" = 1 ]; then "$src/configure" -q; else "$src/configure" -q --with-cuda; fi
fi
make -j"$jobs" >/dev/null || die "the build failed"
if [ "$DRY" = 1 ]; then
  make -j"$jobs" bench/bench-gemm >/dev/null || die "bench/bench-gemm did not build"
else
  make -j"$jobs" tests/test-backend tests/test-nccl bench/bench-gemm-cuda >/dev/null || die "the GPU checks did not build"

  step "parity: tests/test-backend (cuda against cpu, every op)"
  if ! G_DEBUG=fatal-warnings ./tests/test-backend >"$tmp/parity" 2>&1; then
    grep -v '^ok' "$tmp/parity" >&2
    die "tests/test-backend failed"
  fi
  if grep -q '# SKIP' "$tmp/parity"; then
    grep '# SKIP' "$tmp/parity" | head -3 >&2
    die "the cuda cases were skipped: no usable GPU"
  fi
  echo "$(grep -c '^ok' "$tmp/parity") cases passed, none skipped"

  step "NCCL: tests/test-nccl (the two-rank case needs two GPUs; on one it says so)"
  G_DEBUG=fatal-warnings ./tests/test-nccl >"$tmp/nccl" 2>&1 || { cat "$tmp/nccl" >&2; die "tests/test-nccl failed"; }
  grep -v '^#' "$tmp/nccl"
fi

step "SGEMM rate: the layers' GEMMs against $([ "$DRY" = 1 ] && echo OpenBLAS || echo cuBLAS) on the same shapes"
for m in cnn vgg16-cifar100; do
  if [ "$DRY" = 1 ]; then
    ./bench/bench-gemm "$m" "$GEMM_B" 1 >"$tmp/gemm-$m" || die "bench-gemm $m failed"
  else
    ./bench/bench-gemm-cuda "$m" "$GEMM_B" 3 >"$tmp/gemm-$m" || die "bench-gemm-cuda $m failed"
  fi
  grep '^total' "$tmp/gemm-$m" >/dev/null || die "no total line from the GEMM benchmark of $m"
  tail -n 3 "$tmp/gemm-$m"
done

# field NAME FILE: a top-level number or word of a JSON report
field() { sed -n "s/.*\"$1\": \([^,}]*\).*/\1/p" "$2" | head -n 1 | tr -d '"'; }
# side OBJ FILE: a train report from "OBJ": { on (predicted, measured: each comes before the next)
side() { awk -v k="\"$1\": {" '{ i = index($0, k); if (i) print substr($0, i) }' "$2"; }
# tpm: the first time_per_mini_batch of the text on standard input
tpm() { grep -o '"time_per_mini_batch": [^,}]*' | head -n 1 | sed 's/.*: //'; }
# split FILE: layers per stage of a train report, e.g. 2,5
split() { grep -o '"first_layer": [0-9]*, "last_layer": [0-9]*' "$1" | awk -F'[:,]' '{ printf "%s%d", (NR > 1 ? "," : ""), $4 - $2 + 1 }'; }
# finite X: a number that is neither nan nor inf
finite() { awk -v x="$1" 'BEGIN { exit !(x == x + 0 && x != "nan" && x != "inf" && x != "-inf") }'; }
# train NAME MODEL DATA BATCH [extra…]: the JSON report in $tmp/NAME.json; the first failure ends the script
train() {
  n=$1 m=$2 d=$3 b=$4
  shift 4
  if ! timeout 300 ./timeprest train -q -f json --backend "$gpu" -m "$m" --data "$d" -w "$W" -n "$N" -b "$b" \
      --order-from slots --seed 7 "$@" >"$tmp/$n.json" 2>"$tmp/$n.err"; then
    die "train $n failed: $(tail -n 2 "$tmp/$n.err")"
  fi
  loss=$(field final_train_loss "$tmp/$n.json")
  finite "$loss" || die "train $n ended with loss $loss"
  [ "$(field versions_match "$tmp/$n.json")" = true ] || die "train $n read other versions than its schedule's"
}
# row NAME MODEL PRESET K BATCH: one line of the table from the run and its h200 simulation
row() {
  j="$tmp/$1.json" sim="$tmp/$1.sim.json"
  ./timeprest simulate -s "$3" --order-from slots -m "$2" --cluster h200 -w "$W" -n "$N" -b "$5" -k "$4" \
    --split "$(split "$j")" -f json >"$sim" 2>"$tmp/sim.err" || die "simulate $1 on h200: $(tail -n 1 "$tmp/sim.err")"
  meas=$(side measured "$j" | tpm) pred=$(side predicted "$j" | tpm) sim_t=$(tpm <"$sim")
  stores=$(side measured "$j" | sed 's/"error": {.*//' | grep -o '"peak_bytes": [0-9.e+]*' |
    awk '{ printf "%s%.0f", (NR > 1 ? "/" : ""), $2 / 1e6 }')
  used=$(grep -o '"used_peak": [0-9]*' "$j" | awk '{ printf "%s%.0f", (NR > 1 ? "/" : ""), $2 / 1e6 }')
  echo "$2 $3 $(field samples_per_second "$j") $meas $pred $sim_t $stores ${used:-n/a}" \
    >>"$tmp/table"
}
: >"$tmp/table"

cnn_data=$FMNIST
if [ ! -f "$FMNIST/train-images-idx3-ubyte.gz" ] && [ ! -f "$FMNIST/train-images-idx3-ubyte" ]; then
  [ "$DRY" = 1 ] || die "Fashion-MNIST not found in $FMNIST (set FMNIST)"
  cnn_data=synthetic:256:64
  echo "(DRY: Fashion-MNIST not found; synthetic data instead)"
fi
for p in gpipe pipedream timeprest; do
  step "train cnn on $(basename "$cnn_data") ($CNN_RUN), W = $W, $p"
  # shellcheck disable=SC2086
  train "cnn-$p" cnn "$cnn_data" "$B" -s "$p" $CNN_RUN
  row "cnn-$p" cnn "$p" "$(grep -o '"mini_batches": [0-9]*' "$tmp/cnn-$p.json" | head -n 1 | tr -dc 0-9)" "$B"
done
for p in gpipe pipedream timeprest; do
  step "train vgg16-cifar100 on synthetic data, $VGG_K mini-batches, W = $W, $p"
  train "vgg-$p" vgg16-cifar100 "$VGG_DATA" "$VGG_B" -s "$p" -k "$VGG_K"
  row "vgg-$p" vgg16-cifar100 "$p" "$VGG_K" "$VGG_B"
done

step "determinism: $gpu twice with one seed; $gpu against cpu after $DET_K mini-batches (cnn, gpipe)"
train det-a cnn synthetic "$B" -s gpipe -k "$DET_K"
train det-b cnn synthetic "$B" -s gpipe -k "$DET_K"
gpu_saved=$gpu gpu=cpu
train det-cpu cnn synthetic "$B" -s gpipe -k "$DET_K"
gpu=$gpu_saved
sa=$(field weights_sha256 "$tmp/det-a.json") sb=$(field weights_sha256 "$tmp/det-b.json")
lc=$(field final_train_loss "$tmp/det-cpu.json") lg=$(field final_train_loss "$tmp/det-a.json")
rel=$(awk -v a="$lc" -v b="$lg" 'BEGIN { d = (b - a) / (a != 0 ? a : 1); printf "%.2e", d < 0 ? -d : d }')
det_ok=yes
[ "$sa" = "$sb" ] || det_ok=no
awk -v r="$rel" 'BEGIN { exit !(r <= 1e-3) }' || det_ok=no

step "done"
echo
echo "One GPU, W = $W, N = $N, seed 7, unit-slot order; s/mb: seconds per mini-batch, measured and predicted (from"
echo "the profiled costs; from the h200 cluster's analytic model), error = (predicted - measured) / measured;"
echo "store MB: the weight store's peak per stage; used MB: cudaMemGetInfo's most in use on the GPU"
awk '
  BEGIN { printf "%-14s %-9s | %9s | %9s %9s %6s %9s %6s | %-23s %s\n", "model", "preset", "samples/s", "s/mb", "profiled",
          "err", "h200", "err", "store MB per stage", "used MB" }
  { e1 = ($4 > 0 ? 100 * ($5 - $4) / $4 : 0); e2 = ($4 > 0 ? 100 * ($6 - $4) / $4 : 0)
    printf "%-14s %-9s | %9.1f | %9.3e %9.3e %+5.0f%% %9.3e %+5.0f%% | %-23s %s\n", $1, $2, $3, $4, $5, e1, $6, e2, $7, $8 }' \
  "$tmp/table"
for m in cnn vgg16-cifar100; do
  sed -n "s/^total layers_gflops=\([^ ]*\) raw_gflops=\([^ ]*\) efficiency=\([^ ]*\)/SGEMM $m (batch $GEMM_B): layers \1 GFLOP\/s, $([ "$DRY" = 1 ] && echo OpenBLAS || echo cuBLAS) \2 GFLOP\/s on the same shapes (\3 %)/p" "$tmp/gemm-$m"
done
echo "determinism: one weights_sha256 over two $gpu runs: $([ "$sa" = "$sb" ] && echo yes || echo NO);" \
  "loss after $DET_K: cpu $lc, $gpu $lg (relative difference $rel, at most 1e-3)"
echo "elapsed: $(($(date +%s) - start)) s (limit 480 s)"
[ "$det_ok" = yes ] || die "determinism check failed"
[ $(($(date +%s) - start)) -le 480 ] || die "over the 8 minutes allowed"
echo "gpu-check: all checks passed"
