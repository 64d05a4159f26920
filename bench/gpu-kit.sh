#!/bin/sh
# gpu-kit.sh — prepares, on this machine, everything bench/gpu-check.sh runs on a lent GPU machine
# that has the NVIDIA driver, the CUDA toolkit or PyTorch's CUDA wheels, and nothing else of ours:
# no GLib, json-glib, OpenBLAS or Open MPI, no compiler we could rely on, no package registry.
#
# It builds with CUDA and NCCL (the source tree when it is configured with CUDA, else an out-of-tree
# build in _gpu/), then gathers into one ignored folder, _gpukit/:
#   bin/      timeprest, the modules tpcuda.so, tpnccl.so, tpblas.so and tpmpi.so, tests/test-backend,
#             tests/test-nccl, bench/bench-gemm-cuda and bench/bench-gemm (the dry run's stand-in), debug
#             info stripped;
#   lib/      every shared library those need (found with ldd) except the C library's own
#             (libc, libm, libpthread, libdl, librt, the loader), the compiler's runtime (libgcc_s,
#             libstdc++: every image with nvcc has them, and a newer one must not be shadowed), and
#             the CUDA libraries (libcuda, libcudart, libcublas, libcublasLt, libnccl), which
#             gpu-check.sh finds on the machine;
#   models/   the model, device and cluster files, and mlp-deep16 (mlp-deep with two more hidden
#             layers: W = 16 needs 16 layers, mlp-deep has 15);
#   data/fashion-mnist/  the first TRAIN (6000) training and TEST (1000) test samples of
#             Fashion-MNIST as IDX gzip files the data loader reads;
#   cuda-needs  the CUDA sonames the carried programs ask for (gpu-check.sh resolves each);
#   run       runs a carried program with the kit's libraries (see the file); libc-only, the folder
#             of C library files the dry run puts in place of the system's;
#   MANIFEST  the commit, the build, every carried file with its origin and size.
# The lent machine's glibc is newer than this one's: programs linked here run there.
# What travels to the lent machine is the working tree (tracked and untracked, not ignored files) and
# the folders named in the device tool's `carry`, at most 64 MiB together: the script prints both
# sizes and refuses (exit 1, one line) when they do not fit.
# Usage: bench/gpu-kit.sh [BUILDDIR]   Environment: FMNIST (default /usr/share/datasets/fashion-mnist),
# TRAIN, TEST (samples in the slice), JOBS, KIT (default _gpukit in the source tree),
# TP_KIT_LIMIT_MIB (default 64: what may travel).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
TRAIN=${TRAIN:-6000} TEST=${TEST:-1000}
jobs=${JOBS:-2}
kit=${KIT:-$src/_gpukit}
limit=$((${TP_KIT_LIMIT_MIB:-64} * 1024 * 1024))
die() { echo "gpu-kit: $*" >&2; exit 1; }

if [ $# -ge 1 ]; then
  build=$1
elif [ -f "$src/config.status" ]; then
  build=$src
else
  build=$src/_gpu
fi

# ---- build -----------------------------------------------------------------------------------------
[ -x "$src/configure" ] || (cd "$src" && autoreconf -fi) || die "autoreconf failed"
mkdir -p "$build"
cd "$build"
[ -f config.status ] || "$src/configure" -q --with-cuda --with-nccl || die "configure --with-cuda --with-nccl failed in $build"
grep -q '^#define HAVE_CUDA 1' config/config.h || die "$build is configured without CUDA (configure --with-cuda there)"
grep -q '^#define HAVE_NCCL_TRANSPORT 1' config/config.h || die "$build is configured without the NCCL transport (NCCL and MPI)"
echo "gpu-kit: building in $build"
nice make -j"$jobs" >/dev/null || die "the build failed in $build (run make there)"
nice make -j"$jobs" tests/test-backend tests/test-nccl bench/bench-gemm-cuda bench/bench-gemm >/dev/null ||
  die "the GPU check's programs did not build in $build"

# ---- gather ----------------------------------------------------------------------------------------
rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib" "$kit/models" "$kit/data/fashion-mnist"
progs="timeprest tpcuda.so tpnccl.so tpblas.so tpmpi.so tests/test-backend tests/test-nccl bench/bench-gemm-cuda bench/bench-gemm"
for p in $progs; do
  [ -f "$build/$p" ] || die "$build/$p is missing"
  cp "$build/$p" "$kit/bin/"
  strip --strip-debug "$kit/bin/$(basename "$p")" 2>/dev/null || true
done
cp -R "$src/models/." "$kit/models/"
awk '{ print } /^linear 1024$/ && ++n == 6 { print "relu\nlinear 1024\nrelu\nlinear 1024" }' "$src/models/mlp-deep.model" |
  sed 's/^name mlp-deep$/name mlp-deep16/' >"$kit/models/mlp-deep16.model"

# base: the C library's, the compiler runtime's; cuda: found on the lent machine
base='^(linux-vdso|libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so'
cuda='^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia-[a-z-]*|libnvrtc|libnvJitLink)\.so'
: >"$kit/cuda-needs"
{
  echo "# gpu kit made by bench/gpu-kit.sh on $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "commit $(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$src" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "build $build"
  echo "glibc here $(ldd --version | head -n 1 | sed 's/.* //')"
} >"$kit/MANIFEST"
for p in $progs; do
  ldd "$build/$p" >"$kit/ldd.tmp" || die "ldd $p failed"
  if grep -q 'not found' "$kit/ldd.tmp"; then
    die "$p: $(grep 'not found' "$kit/ldd.tmp" | head -n 1 | tr -s ' \t' ' ')"
  fi
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' "$kit/ldd.tmp" | while read -r name path; do
    if echo "$name" | grep -Eq "$base"; then
      continue
    elif echo "$name" | grep -Eq "$cuda"; then
      grep -qx "$name" "$kit/cuda-needs" || echo "$name" >>"$kit/cuda-needs"
    elif [ ! -f "$kit/lib/$name" ]; then
      cp -L "$path" "$kit/lib/$name"
      echo "lib/$name $(stat -L -c %s "$path") from $(readlink -f "$path")" >>"$kit/MANIFEST"
    fi
  done
done
rm -f "$kit/ldd.tmp"

# ---- the Fashion-MNIST slice: the same IDX layout, the count in the header cut to the slice -----------
python3 - "$FMNIST" "$kit/data/fashion-mnist" "$TRAIN" "$TEST" <<'EOF' || die "cannot write the Fashion-MNIST slice from $FMNIST"
import gzip, struct, sys
src, dst, n_train, n_test = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for prefix, n in (("train", n_train), ("t10k", n_test)):
    for kind, ndim in (("images-idx3", 3), ("labels-idx1", 1)):
        name = f"{prefix}-{kind}-ubyte.gz"
        with gzip.open(f"{src}/{name}", "rb") as f:
            head = f.read(4 + 4 * ndim)
            magic, count, *dims = struct.unpack(f">I{ndim}I", head)
            if n > count:
                sys.exit(f"{name}: {count} samples, {n} asked for")
            per = 1
            for d in dims:
                per *= d
            body = f.read(n * per)
        with gzip.GzipFile(f"{dst}/{name}", "wb", compresslevel=9, mtime=0) as g:
            g.write(struct.pack(f">I{ndim}I", magic, n, *dims) + body)
EOF

# ---- the launcher -----------------------------------------------------------------------------------
cat >"$kit/run" <<'EOF'
#!/bin/sh
# run PROGRAM [ARGS…] — a carried program (a path, or a name in the kit's bin/) with the kit's
# libraries: LD_LIBRARY_PATH = the kit's lib/ then $TP_CUDA_LIBS (the folders holding the CUDA
# libraries, which bench/gpu-check.sh finds), the modules, models, clusters and devices of the kit.
# TP_KIT_HIDE=DIR (the dry run): in a mount namespace of its own, DIR (copies of the C library's
# files only) is mounted over /usr/lib/x86_64-linux-gnu, so that nothing but the kit, the C library
# and the CUDA folders can be loaded, as on a bare CUDA image; TP_KIT_NOLIB=1 leaves the kit's lib/
# out too (to see that hiding works: a program must then fail to start).
kit=$(cd "$(dirname "$0")" && pwd)
p=$1
shift
case $p in */*) ;; *) p=$kit/bin/$p ;; esac
lib=$kit/lib
[ -z "${TP_KIT_NOLIB:-}" ] || lib=
LD_LIBRARY_PATH=$lib${TP_CUDA_LIBS:+:$TP_CUDA_LIBS}
TP_CUDA_MODULE=$kit/bin/tpcuda.so TP_NCCL_MODULE=$kit/bin/tpnccl.so TP_BLAS_MODULE=$kit/bin/tpblas.so
TP_MPI_MODULE=$kit/bin/tpmpi.so TP_BIN=$kit/bin/timeprest
TP_MODELS_DIR=$kit/models TP_CLUSTERS_DIR=$kit/models/clusters TP_DEVICES_DIR=$kit/models/devices
export LD_LIBRARY_PATH TP_CUDA_MODULE TP_NCCL_MODULE TP_BLAS_MODULE TP_MPI_MODULE TP_BIN TP_MODELS_DIR TP_CLUSTERS_DIR TP_DEVICES_DIR
if [ -n "${TP_KIT_HIDE:-}" ]; then
  exec unshare -m --propagation private sh -c 'mount --bind "$0" /usr/lib/x86_64-linux-gnu && exec "$@"' \
    "$TP_KIT_HIDE" "$p" "$@"
fi
exec "$p" "$@"
EOF
chmod +x "$kit/run"
cat >"$kit/libc-only" <<'EOF'
#!/bin/sh
# libc-only DIR — fills DIR with copies of the C library's files and the compiler runtime's (what a
# bare CUDA image has too): the folder the dry run mounts over /usr/lib/x86_64-linux-gnu (run).
mkdir -p "$1" || exit 1
for l in libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2 libutil.so.1 \
    ld-linux-x86-64.so.2 libgcc_s.so.1 libstdc++.so.6; do
  [ ! -e "/usr/lib/x86_64-linux-gnu/$l" ] || cp -L "/usr/lib/x86_64-linux-gnu/$l" "$1/" || exit 1
done
EOF
chmod +x "$kit/libc-only"

# ---- size ---------------------------------------------------------------------------------------------
kit_b=$(du -sb "$kit" | cut -f1)
tree_b=$(cd "$src" && git ls-files -z -c -o --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "size kit $kit_b $(mib "$kit_b")" >>"$kit/MANIFEST"
echo "gpu-kit: $kit: $(mib "$kit_b") ($(ls "$kit/lib" | wc -l) libraries, $(mib "$(du -sb "$kit/lib" | cut -f1)")); working tree $(mib "$tree_b"); together $(mib $((kit_b + tree_b))) of $(mib "$limit")"
echo "gpu-kit: the CUDA libraries gpu-check.sh must find there: $(tr '\n' ' ' <"$kit/cuda-needs")"
if [ $((kit_b + tree_b)) -gt "$limit" ]; then
  rm -rf "$kit"
  die "the kit ($(mib "$kit_b")) and the working tree ($(mib "$tree_b")) exceed the $(mib "$limit") that travel; kit removed"
fi
echo "gpu-kit: ready; carry ${kit#"$src"/} and run bench/gpu-check.sh there"
