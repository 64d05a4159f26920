#!/bin/sh
# gpu-check.sh — the checks of the cuda backend that need a GPU (not run in CI): configure with
# CUDA required, build, run tests/test-backend (the cuda-vs-cpu parity cases must run, not skip),
# then time each layer's forward + backward of mlp and cnn at batch 128 on cpu and cuda and print
# the tables. Takes a few minutes at most (most of it the build).
# Usage: bench/gpu-check.sh [BUILDDIR]   (default: the source tree if configured there, else _gpu)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
if [ -f "$src/config.status" ]; then
  build=${1:-$src}
else
  build=${1:-$src/_gpu}
fi
jobs=$(nproc 2>/dev/null || echo 2)
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
make -j"$jobs" tests/test-backend bench/bench-layers >/dev/null

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

step "layers: forward + backward at batch 128, cpu vs cuda"
for model in mlp cnn; do
  ./bench/bench-layers "$model" 128 10 cpu cuda
  echo
done
step "done"
