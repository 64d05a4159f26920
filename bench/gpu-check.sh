#!/bin/sh
# gpu-check.sh — the one call a lent GPU machine gets (docs/gpu.md): it runs the kit that
# bench/gpu-kit.sh made here (carried as _gpukit/) and needs no compiler, no package and no build
# there.  In order, each step timed; a step that fails says why and the next one runs:
#  1. the device (nvidia-smi) and the CUDA libraries the kit asks for (cuda-needs), looked for in
#     $CUDA_LIBS, the CUDA toolkit's folders and PyTorch's nvidia/*/lib wheels; it prints which;
#  2. every carried program resolves every library: the kit's own from the kit's lib/, the CUDA ones
#     from the folders of step 1, nothing else but the C library and the compiler's runtime;
#  3. parity: tests/test-backend with TP_REQUIRE=cuda (every backend operation and the whole mlp and
#     cnn networks, cuda against cpu; a case that cannot reach a GPU fails instead of skipping),
#     then tests/test-nccl (one GPU: its two-rank exchange and its two-replica all-reduce cannot run;
#     NCCL links and NCCL's all-reduce are not checked);
#  4. the SGEMM rate of the cnn's and vgg16-cifar100's layers against cuBLAS on the same shapes;
#  5. one GPU, W = 4 stages (one stream each), gpipe, pipedream and timeprest: cnn on the carried
#     Fashion-MNIST slice for one epoch, vgg16-cifar100 on synthetic data for 50 mini-batches
#     (batch 128, N = 4, seed 7, unit-slot order): samples/s, measured time per mini-batch against
#     the profiled prediction (train's own) and the h200 cluster's analytic one (`simulate`), the
#     weight store's peak per stage and cudaMemGetInfo's peak in use;
#     then resnet50-cifar100 (gpipe, timeprest; batchnorm and bottlenecks) on synthetic data, then
#     llama-tiny (gpipe, timeprest) and tinyllama-1.1b (gpipe, 4 sequences of 2048 tokens) on
#     synthetic tokens with AdamW, the same measures;
#  6. the CPU pipeline (cpu backend, local transport) on mlp-deep at W = 1, 2, 4, 8 and on
#     mlp-deep16 at W = 1, 16 (mlp-deep has 15 layers): speed-up over -w 1, prediction error;
#  7. determinism (two cuda runs, one weights_sha256; cuda against cpu loss after 20 mini-batches);
#  8. the parity test under compute-sanitizer, if the machine has it and time is left.
# One table comes last on stdout and goes to $OUT/gpu-check.md (OUT: the device tool's folder;
# default bench/results/gpu-check), the run reports to $OUT/runs/.  Exit 0 when every step passed.
# Planned on an H200 with 16 cores: about 5 of the 8 minutes a call may take (limit 480 s).
# Usage: bench/gpu-check.sh   Environment: KIT (default _gpukit beside bench/), CUDA_LIBS (folders
# to look in first), DRY=1: the dry run on a machine without a GPU — the cpu backend stands in for
# cuda at tiny sizes, TP_REQUIRE is checked to fail rather than to pass, and (where `unshare -m` is
# allowed) every carried program runs with /usr/lib/x86_64-linux-gnu hidden but for the C library's
# files, so that only the kit's libraries can be found (tests/gpu-kit-check.sh).
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
kit=${KIT:-$src/_gpukit}
DRY=${DRY:-0}
OUT=${OUT:-$src/bench/results/gpu-check}
start=$(date +%s)
last=$start
failed=""
step() {
  now=$(date +%s)
  printf '== [%4ss, previous step %ss] %s\n' "$((now - start))" "$((now - last))" "$1"
  last=$now
  current=$1
}
# fail WHY: the current step failed; the script goes on
fail() {
  echo "   FAILED: $*"
  failed="$failed
  - $current: $*"
}
chmod +x "$kit/run" "$kit"/bin/* 2>/dev/null # in case the carried copy lost its modes
[ -x "$kit/run" ] || { echo "gpu-check: no kit at $kit (make it with bench/gpu-kit.sh and carry _gpukit)" >&2; exit 1; }
mkdir -p "$OUT/runs" || { echo "gpu-check: cannot make $OUT" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { "$kit/run" "$@"; }

if [ "$DRY" = 1 ]; then
  gpu=cpu W=4 B=8 N=4 CNN_RUN="-k 6" VGG_K=2 VGG_B=4 VGG_DATA=synthetic:64:16 DET_K=4 GEMM_B=8 RES_K=1 RES_B=8
  LM_K=2 LM_B=8 LM_DATA=synthetic:32:8 BIG=llama-tiny BIG_K=1 BIG_B=4 BIG_DATA=synthetic:8:4
  CPU_W="1 2 4" CPU_W16="1 16" CPU_K=3 CPU_B=16
  echo "DRY=1: no GPU; the \"gpu\" runs use the cpu backend at tiny sizes (their numbers say nothing about GPUs)"
else
  gpu=cuda W=4 B=128 N=4 CNN_RUN="--epochs 1" VGG_K=50 VGG_B=128 VGG_DATA=synthetic:6400:1024 DET_K=20 GEMM_B=128
  RES_K=30 RES_B=128
  LM_K=30 LM_B=64 LM_DATA=synthetic:1920:256 BIG=tinyllama-1.1b BIG_K=3 BIG_B=4 BIG_DATA=synthetic:12:4
  CPU_W="1 2 4 8" CPU_W16="1 16" CPU_K=40 CPU_B=128
fi

# ---- the dry run's hidden system library folder ----------------------------------------------------
if [ "$DRY" = 1 ] && [ "${HIDE:-1}" = 1 ]; then
  "$kit/libc-only" "$tmp/hide"
  if TP_KIT_HIDE=$tmp/hide run /lib64/ld-linux-x86-64.so.2 --list "$kit/bin/timeprest" >/dev/null 2>&1; then
    export TP_KIT_HIDE="$tmp/hide"
    echo "DRY=1: /usr/lib/x86_64-linux-gnu is hidden from every carried program but for the C library's files"
  else
    echo "DRY=1: cannot hide the system libraries here (unshare -m or mount refused): plain run"
  fi
fi

step "the device"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader || fail "nvidia-smi failed"
  nvidia-smi | head -n 12
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
else
  echo "nvidia-smi not found"
  [ "$DRY" = 1 ] || fail "no nvidia-smi: is there a GPU?"
  gpu_name="none"
fi

step "the CUDA libraries the kit needs ($(tr '\n' ' ' <"$kit/cuda-needs"))"
# candidate folders, in order: $CUDA_LIBS, the toolkit's, PyTorch's wheels, the loader's cache
cands=$(
  echo "${CUDA_LIBS:-}" | tr ':' '\n'
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
      /usr/local/cuda-*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do echo "$d"; done
  for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 &&
      "$py" -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
  done | while read -r sp; do ls -d "$sp"/nvidia/*/lib 2>/dev/null; done
  ls -d /usr/local/lib/python3*/dist-packages/nvidia/*/lib /usr/lib/python3*/dist-packages/nvidia/*/lib \
    /opt/conda/lib/python3*/site-packages/nvidia/*/lib 2>/dev/null
)
ldc=$(command -v ldconfig || echo /sbin/ldconfig)
TP_CUDA_LIBS=""
while read -r so; do
  found=""
  for d in $cands; do
    if [ -e "$d/$so" ]; then found=$d; break; fi
  done
  [ -n "$found" ] || found=$("$ldc" -p 2>/dev/null | awk -v s="$so" '$1 == s { sub(/\/[^\/]*$/, "", $NF); print $NF; exit }')
  if [ -n "$found" ]; then
    case $found in */nvidia/*) how="PyTorch's wheel" ;; */cuda*) how="CUDA toolkit" ;; *) how="system" ;; esac
    echo "   $so: $found ($how)"
    case ":$TP_CUDA_LIBS:" in *":$found:"*) ;; *) TP_CUDA_LIBS=${TP_CUDA_LIBS:+$TP_CUDA_LIBS:}$found ;; esac
  else
    fail "$so not found (give its folder in CUDA_LIBS)"
  fi
done <"$kit/cuda-needs"
libcuda=$("$ldc" -p 2>/dev/null | awk '$1 == "libcuda.so.1" { print $NF; exit }')
echo "   libcuda.so.1 (the driver's): ${libcuda:-not in the loader's cache}"
export TP_CUDA_LIBS

step "every carried program resolves its libraries in the kit (and the CUDA folders above)"
for p in "$kit"/bin/*; do
  if ! run /lib64/ld-linux-x86-64.so.2 --list "$p" >"$tmp/list" 2>&1; then
    fail "$(basename "$p"): $(grep -m 1 -i 'not found\|error' "$tmp/list")"
    continue
  fi
  awk -v kit="$kit/lib/" -v cuda=":$TP_CUDA_LIBS:" -v p="$(basename "$p")" '
    $2 == "=>" {
      name = $1; path = $3; dir = path; sub(/\/[^\/]*$/, "", dir)
      if (path == "not") { print p ": " name " not found"; next }
      if (name ~ /^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libgcc_s|libstdc\+\+)\.so/) next
      if (name ~ /^(libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so/) { if (index(cuda, ":" dir ":") || name == "libcuda.so.1") next }
      if (index(path, kit) != 1) print p ": " name " from " path " (not the kit)"
    }' "$tmp/list" >"$tmp/bad"
  if [ -s "$tmp/bad" ]; then
    while read -r line; do fail "$line"; done <"$tmp/bad"
  else
    echo "   $(basename "$p"): $(awk '$2 == "=>"' "$tmp/list" | wc -l) libraries, all from the kit, the C library or the CUDA folders"
  fi
done

tap() { grep -c "^$1" "$2" || true; }
step "parity: tests/test-backend (cuda against cpu: every operation, mlp and cnn whole)"
if [ "$DRY" = 1 ]; then
  run test-backend --tap >"$tmp/parity" 2>&1 || fail "tests/test-backend failed: $(grep -m 1 '^not ok' "$tmp/parity")"
  echo "   $(tap ok "$tmp/parity") passed ($(grep -c '# SKIP' "$tmp/parity") skipped: no GPU here)"
  if TP_REQUIRE=cuda run test-backend --tap -p /backend/cuda-vs-cpu/net-mlp >"$tmp/require" 2>&1; then
    fail "TP_REQUIRE=cuda did not turn the skipped cuda case into a failure"
  else
    echo "   TP_REQUIRE=cuda: the cuda case fails here, as it must without a GPU ($(grep -m 1 -o 'cuda[^\"]*required[^\"]*' "$tmp/require" | head -c 100))"
  fi
else
  if TP_REQUIRE=cuda G_DEBUG=fatal-warnings run test-backend --tap >"$tmp/parity" 2>&1; then
    echo "   $(tap ok "$tmp/parity") passed, $(grep -c '# SKIP' "$tmp/parity") skipped"
  else
    grep '^not ok' "$tmp/parity" | head -n 5 | sed 's/^/   /'
    fail "tests/test-backend: $(tap 'not ok' "$tmp/parity") failed of $(grep -c '^\(not \)\?ok' "$tmp/parity")"
  fi
fi
cp "$tmp/parity" "$OUT/runs/parity.tap"
parity="$(tap ok "$tmp/parity") ok, $(tap 'not ok' "$tmp/parity") failed, $(grep -c '# SKIP' "$tmp/parity") skipped"

step "NCCL: tests/test-nccl (one GPU: the two-rank exchange and the two-replica all-reduce cannot run here)"
if G_DEBUG=fatal-warnings run test-nccl --tap >"$tmp/nccl" 2>&1; then
  grep '^ok' "$tmp/nccl" | sed 's/^/   /'
else
  grep '^not ok' "$tmp/nccl" | sed 's/^/   /'
  fail "tests/test-nccl failed"
fi

gemm_line() { sed -n "s/^total layers_gflops=\([^ ]*\) raw_gflops=\([^ ]*\) efficiency=\([^ ]*\)/\1 \2 \3/p" "$1"; }
step "SGEMM rate: the layers' GEMMs against $([ "$DRY" = 1 ] && echo OpenBLAS || echo cuBLAS) on the same shapes"
for m in cnn vgg16-cifar100; do
  if [ "$DRY" = 1 ]; then
    run bench-gemm "$m" "$GEMM_B" 1 >"$tmp/gemm-$m" 2>&1
  else
    timeout 120 "$kit/run" bench-gemm-cuda "$m" "$GEMM_B" 3 >"$tmp/gemm-$m" 2>&1
  fi || fail "the GEMM benchmark of $m: $(tail -n 1 "$tmp/gemm-$m")"
  [ -n "$(gemm_line "$tmp/gemm-$m")" ] && tail -n 3 "$tmp/gemm-$m" || fail "no total line from the GEMM benchmark of $m"
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
# train NAME BACKEND MODEL DATA BATCH W [extra…]: the report in $OUT/runs/NAME.json; 1 when it failed
train() {
  n=$1 be=$2 m=$3 d=$4 b=$5 w=$6
  shift 6
  if ! timeout 150 "$kit/run" timeprest train -q -f json --backend "$be" -m "$m" --data "$d" -w "$w" -n "$N" -b "$b" \
      --order-from slots --seed 7 "$@" >"$OUT/runs/$n.json" 2>"$tmp/$n.err"; then
    fail "train $n: $(tail -n 2 "$tmp/$n.err" | tr '\n' ' ')"
    return 1
  fi
  loss=$(field final_train_loss "$OUT/runs/$n.json")
  finite "$loss" || { fail "train $n ended with loss $loss"; return 1; }
  [ "$(field versions_match "$OUT/runs/$n.json")" = true ] || { fail "train $n read other versions than its schedule's"; return 1; }
}
# row NAME MODEL PRESET K BATCH: one line of the GPU table from the run and its h200 simulation
row() {
  j="$OUT/runs/$1.json" sim="$OUT/runs/$1.h200.json"
  if ! run timeprest simulate -s "$3" --order-from slots -m "$2" --cluster h200 -w "$W" -n "$N" -b "$5" -k "$4" \
      --split "$(split "$j")" -f json >"$sim" 2>"$tmp/sim.err"; then
    fail "simulate $1 on h200: $(tail -n 1 "$tmp/sim.err")"
    echo 0 >"$sim"
  fi
  meas=$(side measured "$j" | tpm) pred=$(side predicted "$j" | tpm) sim_t=$(tpm <"$sim")
  stores=$(side measured "$j" | sed 's/"error": {.*//' | grep -o '"peak_bytes": [0-9.e+]*' |
    awk '{ printf "%s%.0f", (NR > 1 ? "/" : ""), $2 / 1e6 }')
  used=$(grep -o '"used_peak": [0-9]*' "$j" | awk '{ printf "%s%.0f", (NR > 1 ? "/" : ""), $2 / 1e6 }')
  echo "$2 $3 $(field samples_per_second "$j") $meas $pred ${sim_t:-0} ${stores:-n/a} ${used:-n/a}" >>"$tmp/table"
}
: >"$tmp/table"

data=$kit/data/fashion-mnist
for p in gpipe pipedream timeprest; do
  step "train cnn on the carried Fashion-MNIST slice ($CNN_RUN), W = $W, $p, $gpu"
  # shellcheck disable=SC2086
  train "cnn-$p" "$gpu" cnn "$data" "$B" "$W" -s "$p" $CNN_RUN &&
    row "cnn-$p" cnn "$p" "$(grep -o '"mini_batches": [0-9]*' "$OUT/runs/cnn-$p.json" | head -n 1 | tr -dc 0-9)" "$B"
done
for p in gpipe pipedream timeprest; do
  step "train vgg16-cifar100 on synthetic data, $VGG_K mini-batches, W = $W, $p, $gpu"
  train "vgg-$p" "$gpu" vgg16-cifar100 "$VGG_DATA" "$VGG_B" "$W" -s "$p" -k "$VGG_K" &&
    row "vgg-$p" vgg16-cifar100 "$p" "$VGG_K" "$VGG_B"
done
for p in gpipe timeprest; do
  step "train resnet50-cifar100 on synthetic data, $RES_K mini-batches, W = $W, $p, $gpu"
  train "resnet-$p" "$gpu" resnet50-cifar100 "synthetic:$((RES_B * RES_K)):$RES_B" "$RES_B" "$W" -s "$p" -k "$RES_K" &&
    row "resnet-$p" resnet50-cifar100 "$p" "$RES_K" "$RES_B"
done

for p in gpipe timeprest; do
  step "train llama-tiny (AdamW) on synthetic tokens, $LM_K mini-batches, W = $W, $p, $gpu"
  train "llama-$p" "$gpu" llama-tiny "$LM_DATA" "$LM_B" "$W" -s "$p" -k "$LM_K" --optimizer adamw &&
    row "llama-$p" llama-tiny "$p" "$LM_K" "$LM_B"
done
step "train $BIG (AdamW, fp32) on synthetic tokens, $BIG_K mini-batches of $BIG_B sequences, W = $W, gpipe, $gpu"
train "big-gpipe" "$gpu" "$BIG" "$BIG_DATA" "$BIG_B" "$W" -s gpipe -k "$BIG_K" --optimizer adamw --profile-reps 1 &&
  row "big-gpipe" "$BIG" gpipe "$BIG_K" "$BIG_B"

step "the CPU pipeline: mlp-deep at W = $CPU_W, mlp-deep16 at W = $CPU_W16 (timeprest, local transport, $(nproc) cores)"
: >"$tmp/cpu"
for mw in $(for w in $CPU_W; do echo "mlp-deep:$w"; done; for w in $CPU_W16; do echo "mlp-deep16:$w"; done); do
  m=${mw%:*} w=${mw#*:}
  if train "cpu-$m-w$w" cpu "$m" synthetic "$CPU_B" "$w" -s timeprest -k "$CPU_K"; then
    j="$OUT/runs/cpu-$m-w$w.json"
    echo "$m $w $(field samples_per_second "$j") $(side measured "$j" | tpm) $(side predicted "$j" | tpm)" >>"$tmp/cpu"
    echo "   $m W = $w: $(field samples_per_second "$j") samples/s"
  fi
done

step "determinism: $gpu twice with one seed; $gpu against cpu after $DET_K mini-batches (cnn, gpipe)"
det="not run"
if train det-a "$gpu" cnn synthetic "$B" "$W" -s gpipe -k "$DET_K" && train det-b "$gpu" cnn synthetic "$B" "$W" -s gpipe -k "$DET_K" &&
    train det-cpu cpu cnn synthetic "$B" "$W" -s gpipe -k "$DET_K"; then
  sa=$(field weights_sha256 "$OUT/runs/det-a.json") sb=$(field weights_sha256 "$OUT/runs/det-b.json")
  lc=$(field final_train_loss "$OUT/runs/det-cpu.json") lg=$(field final_train_loss "$OUT/runs/det-a.json")
  rel=$(awk -v a="$lc" -v b="$lg" 'BEGIN { d = (b - a) / (a != 0 ? a : 1); printf "%.2e", d < 0 ? -d : d }')
  det="one weights_sha256 over two $gpu runs: $([ "$sa" = "$sb" ] && echo yes || echo NO); loss after $DET_K: cpu $lc, $gpu $lg (relative difference $rel, at most 1e-3)"
  [ "$sa" = "$sb" ] || fail "two $gpu runs with one seed gave two weights_sha256"
  awk -v r="$rel" 'BEGIN { exit !(r <= 1e-3) }' || fail "the $gpu loss is $rel from the cpu loss"
fi

sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ "$DRY" = 1 ]; then
  sanitizer="not run (dry run)"
else
  step "the parity test under compute-sanitizer"
  if [ -z "$sanitizer" ]; then
    sanitizer="not found"
    echo "   compute-sanitizer not found"
  elif [ $(($(date +%s) - start)) -gt 330 ]; then
    sanitizer="not run (no time left)"
    echo "   $sanitizer"
  else
    if TP_REQUIRE=cuda timeout 120 "$kit/run" "$sanitizer" --error-exitcode 99 --leak-check none "$kit/bin/test-backend" \
        -p /backend/cuda-vs-cpu >"$tmp/sanitizer" 2>&1; then
      sanitizer="clean ($(tap ok "$tmp/sanitizer") cases)"
    else
      grep -m 3 'Invalid\|ERROR\|not ok' "$tmp/sanitizer" | sed 's/^/   /'
      sanitizer="errors (or over 120 s): see runs/sanitizer.txt"
      fail "compute-sanitizer: $sanitizer"
    fi
    cp "$tmp/sanitizer" "$OUT/runs/sanitizer.txt"
    echo "   $sanitizer"
  fi
fi

step "done"
{
  echo "## GPU check, $(date -u +%Y-%m-%d) — $([ "$DRY" = 1 ] && echo "DRY RUN (cpu backend standing in, tiny sizes: the numbers say nothing about GPUs)" || echo "$gpu_name")"
  echo
  echo "Kit: $(sed -n 's/^commit //p' "$kit/MANIFEST"); CUDA libraries from ${TP_CUDA_LIBS:-nowhere}; $(nproc) cores."
  echo "Parity (tests/test-backend$([ "$DRY" = 1 ] || echo ", TP_REQUIRE=cuda")): $parity. NCCL links: not checked (one GPU;"
  echo "two ranks on one GPU are refused with one line). compute-sanitizer on the parity test: ${sanitizer:-not run}."
  echo "Data parallelism (--data-parallel D > 1): NCCL's all-reduce cannot run on one GPU (NCCL takes a rank per GPU,"
  echo "so D replicas need D GPUs: tests/test-nccl /nccl/allreduce $(grep -q '^ok.*/nccl/allreduce # SKIP' "$tmp/nccl" 2>/dev/null && echo skipped || echo ran)); the trainer runs replicas on the cpu backend only."
  echo
  echo "One GPU, W = $W, N = $N, batch $B (vgg16 $VGG_B, llama-tiny $LM_B, $BIG $BIG_B), seed 7, unit-slot order. s/mb: seconds per mini-batch, measured;"
  echo "profiled / h200: predicted from train's profiled costs / from the h200 cluster's analytic model;"
  echo "err = (predicted - measured) / measured. store MB: the weight store's peak per stage; used MB:"
  echo "cudaMemGetInfo's most in use on the GPU (memory pools included)."
  echo
  echo "| model | preset | samples/s | s/mb | profiled | err | h200 | err | store MB per stage | used MB |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  awk '{ e1 = ($4 > 0 ? 100 * ($5 - $4) / $4 : 0); e2 = ($4 > 0 && $6 > 0 ? 100 * ($6 - $4) / $4 : 0)
         printf "| %s | %s | %.1f | %.3e | %.3e | %+.0f%% | %.3e | %+.0f%% | %s | %s |\n", $1, $2, $3, $4, $5, e1, $6, e2, $7, $8 }' \
    "$tmp/table"
  echo
  for m in cnn vgg16-cifar100; do
    g=$(gemm_line "$tmp/gemm-$m")
    [ -n "$g" ] && echo "SGEMM $m (batch $GEMM_B): layers ${g%% *} GFLOP/s; $([ "$DRY" = 1 ] && echo OpenBLAS || echo cuBLAS) $(echo "$g" | cut -d' ' -f2) GFLOP/s on the same shapes ($(echo "$g" | cut -d' ' -f3) %)."
  done
  echo
  echo "CPU pipeline (cpu backend, local transport, timeprest, batch $CPU_B, N = $N, $CPU_K mini-batches, synthetic data;"
  echo "speed-up over -w 1 of the same model; err = (profiled prediction - measured) / measured):"
  echo
  echo "| model | W | samples/s | speed-up | s/mb | predicted | err |"
  echo "|---|---|---|---|---|---|---|"
  awk '$2 == 1 { one[$1] = $3 } { sp = (one[$1] > 0 ? $3 / one[$1] : 0); e = ($4 > 0 ? 100 * ($5 - $4) / $4 : 0)
       printf "| %s | %d | %.1f | %.2fx | %.3e | %.3e | %+.0f%% |\n", $1, $2, $3, sp, $4, $5, e }' "$tmp/cpu"
  echo
  echo "Determinism: $det."
  echo "Elapsed: $(($(date +%s) - start)) s (limit 480 s). $([ -z "$failed" ] && echo "Every step passed." || echo "Failed steps:$failed")"
} >"$OUT/gpu-check.md"
echo
cat "$OUT/gpu-check.md"
[ $(($(date +%s) - start)) -le 480 ] || fail "over the 8 minutes allowed"
if [ -n "$failed" ]; then
  echo "gpu-check: failed:$failed" >&2
  exit 1
fi
echo "gpu-check: all checks passed (table in $OUT/gpu-check.md)"
