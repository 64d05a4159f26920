#!/bin/sh
# gpu-kit-check.sh — keeps the GPU kit honest on a machine without a GPU (outside `make check`: it
# needs the CUDA toolkit and NCCL to build the kit; run it with `make kit-check` or directly,
# optionally naming the build folder configured with CUDA).  It makes the kit (bench/gpu-kit.sh)
# and checks that:
#  1. hiding the system's library folder works: with /usr/lib/x86_64-linux-gnu replaced by the C
#     library's files alone and without the kit's lib/, timeprest cannot start (GLib, Open MPI…
#     are not found); with the kit's lib/ it starts;
#  2. ldd of every carried program, with the kit's lib/ first, resolves every library but the C
#     library's, the compiler runtime's and the CUDA ones inside the kit, and none is missing;
#  3. the Fashion-MNIST slice holds the samples asked for and the data loader reads it (a run of
#     one epoch has 6000 / 128 = 46 mini-batches);
#  4. a kit that would not fit is refused with one line, exit 1, and no kit left behind;
#  5. DRY=1 bench/gpu-check.sh passes from the kit with the system libraries hidden, prints its
#     table and finds TP_REQUIRE=cuda failing rather than skipping where there is no GPU.
# Needs: unshare -m and mount allowed (root in a container), else step 1 and the hidden dry run
# cannot be checked and the script fails saying so.  About 4 minutes on 2 busy cores.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
kit=$src/_gpukit
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; bad=1; }

"$src/bench/gpu-kit.sh" "$@" >"$tmp/kit.out" 2>&1 || { cat "$tmp/kit.out"; echo "not ok - bench/gpu-kit.sh failed"; exit 1; }
sed -n 's/^gpu-kit: //p' "$tmp/kit.out" | sed 's/^/# /'

# 1. hiding works
"$kit/libc-only" "$tmp/hide" || notok "$kit/libc-only failed"
if TP_KIT_HIDE=$tmp/hide TP_KIT_NOLIB=1 "$kit/run" timeprest --help >"$tmp/nolib" 2>&1; then
  notok "timeprest started with the system libraries hidden and without the kit's: hiding does not work"
elif grep -q 'error while loading shared libraries: lib.*cannot open shared object file' "$tmp/nolib"; then
  ok "hidden system libraries, no kit: $(grep -o 'lib[^:]*: cannot open' "$tmp/nolib")"
else
  notok "the hidden run failed otherwise: $(head -n 1 "$tmp/nolib")"
fi
if TP_KIT_HIDE=$tmp/hide "$kit/run" timeprest --help >/dev/null 2>"$tmp/withlib"; then
  ok "hidden system libraries, the kit's lib/: timeprest starts"
else
  notok "timeprest does not start from the kit: $(head -n 1 "$tmp/withlib")"
fi

# 2. ldd resolves in the kit
for p in "$kit"/bin/*; do
  LD_LIBRARY_PATH=$kit/lib ldd "$p" | awk -v kit="$kit/lib/" -v p="$(basename "$p")" '
    /not found/ { print p ": " $1 " not found"; next }
    $2 == "=>" && $1 !~ /^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so/ &&
      index($3, kit) != 1 { print p ": " $1 " from " $3 }' >"$tmp/ldd"
  if [ -s "$tmp/ldd" ]; then notok "$(head -n 1 "$tmp/ldd")"; else ok "ldd $(basename "$p"): every library in the kit"; fi
done

# 3. the slice
counts=$(python3 -c '
import gzip, struct, sys
for f in sys.argv[1:]:
    print(struct.unpack(">II", gzip.open(f).read(8))[1], end=" ")' \
  "$kit"/data/fashion-mnist/train-images-idx3-ubyte.gz "$kit"/data/fashion-mnist/train-labels-idx1-ubyte.gz \
  "$kit"/data/fashion-mnist/t10k-images-idx3-ubyte.gz "$kit"/data/fashion-mnist/t10k-labels-idx1-ubyte.gz)
[ "$counts" = "6000 6000 1000 1000 " ] && ok "the slice holds 6000 + 1000 samples" || notok "the slice holds $counts"
if "$kit/run" timeprest train -q -f json -m mlp -w 1 -b 128 --epochs 1 --data "$kit/data/fashion-mnist" >"$tmp/epoch.json" 2>"$tmp/epoch.err" &&
    grep -q '"mini_batches": 46,' "$tmp/epoch.json"; then
  ok "one epoch of the slice: 46 mini-batches of 128"
else
  notok "one epoch of the slice: $(head -n 1 "$tmp/epoch.err") $(grep -o '"mini_batches": [0-9]*' "$tmp/epoch.json")"
fi

# 4. too big is refused
if KIT=$tmp/small TP_KIT_LIMIT_MIB=1 "$src/bench/gpu-kit.sh" "$@" >"$tmp/small.out" 2>"$tmp/small.err"; then
  notok "a kit over the limit was not refused"
elif [ "$(wc -l <"$tmp/small.err")" -eq 1 ] && grep -q 'exceed the 1.0 MiB that travel' "$tmp/small.err" && [ ! -e "$tmp/small" ]; then
  ok "over the limit: $(cat "$tmp/small.err")"
else
  notok "the refusal over the limit: $(cat "$tmp/small.err") (kit left: $([ -e "$tmp/small" ] && echo yes || echo no))"
fi

# 5. the dry run
if DRY=1 OUT=$tmp/out "$src/bench/gpu-check.sh" >"$tmp/dry" 2>&1; then
  ok "DRY=1 bench/gpu-check.sh passed in $(sed -n 's/^Elapsed: \([0-9]*\) s.*/\1/p' "$tmp/dry") s"
else
  notok "DRY=1 bench/gpu-check.sh failed: $(sed -n '/^gpu-check: failed/,$p' "$tmp/dry" | tr '\n' ' ')"
fi
grep -q '^DRY=1: /usr/lib/x86_64-linux-gnu is hidden' "$tmp/dry" && ok "the dry run hid the system libraries" ||
  notok "the dry run could not hide the system libraries"
grep -q 'TP_REQUIRE=cuda: the cuda case fails here' "$tmp/dry" && ok "TP_REQUIRE=cuda fails rather than skips" ||
  notok "TP_REQUIRE=cuda did not fail here"
grep -q '^| model | preset | samples/s' "$tmp/out/gpu-check.md" &&
  ok "the table is in \$OUT/gpu-check.md" || notok "no table in \$OUT/gpu-check.md"
mkdir -p "$src/bench/results" && cp "$tmp/dry" "$src/bench/results/gpu-check-dry.txt" # ignored: for bench/RESULTS.md
exit $bad
