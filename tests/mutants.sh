#!/bin/sh
# mutants.sh — the suite's strength, measured (`make mutants`, outside `make check`): plausible bugs
# put into a scratch copy of the source one at a time, the tests that should catch each run, and each
# bug the tests let through named.  The copy is built once (without CUDA, NCCL and MPI); each bug is a
# literal replacement in one file, rebuilt incrementally and undone after its tests.  A pattern no
# longer found (the code moved) is said, not counted.  Exit 0 when every bug was caught.  Add a bug:
# one more `mutant` line below.  About 10 minutes on 2 cores.
# Usage: tests/mutants.sh
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$src" ls-files -z | (cd "$src" && xargs -0 tar -cf -) | tar -xf - -C "$work"
cd "$work" || exit 1
echo "mutants: building a scratch copy in $work"
{ autoreconf -fi && ./configure --without-cuda --without-nccl --without-mpi && make -j"$(nproc)" &&
  make -j"$(nproc)" check TESTS=; } >build.log 2>&1 || { tail -20 build.log; echo "mutants: the copy does not build"; exit 1; }
survived=0 caught=0 moved=0
# the control: every test named below passes on the copy as it is (else a "catch" would mean nothing)
for t in test-zb test-torch test-plan test-fuse test-token-train test-profile test-token-layers test-recompute test-train; do
  TP_BIN=$work/timeprest TP_SRCDIR=$work timeout 600 "./tests/$t" >/dev/null 2>&1 ||
    { echo "mutants: $t fails without any bug put in: fix that first"; exit 1; }
done
# mutant NAME FILE FROM TO TEST...: FROM replaced (first occurrence) by TO in FILE, then the tests
mutant() {
  name=$1 file=$2 from=$3 to=$4
  shift 4
  if ! grep -qF -- "$from" "$file"; then
    echo "?  $name: '$from' is no longer in $file (the code moved: update the list)"
    moved=$((moved + 1))
    return
  fi
  cp "$file" "$file.orig"
  python3 -c 'import sys; p, a, b = sys.argv[1:4]; s = open(p).read(); open(p, "w").write(s.replace(a, b, 1))' "$file" "$from" "$to"
  red=""
  if make -j"$(nproc)" >/dev/null 2>&1 && make -j"$(nproc)" check TESTS= >/dev/null 2>&1; then
    for t in "$@"; do
      TP_BIN=$work/timeprest TP_SRCDIR=$work timeout 600 "./tests/$t" >/dev/null 2>&1 || red="$red $t"
    done
  else
    red=" (the build)"
  fi
  mv "$file.orig" "$file"
  touch "$file"
  if [ -n "$red" ]; then
    echo "ok $name: caught by$red"
    caught=$((caught + 1))
  else
    echo "SURVIVED $name: $* stayed green"
    survived=$((survived + 1))
  fi
}
mutant "zb-h2's W deferral 2s - 1" common/tp_orders.c "defer = h2 ? 2 * st : st" "defer = h2 ? 2 * st - 1 : st" test-zb
mutant "PyTorch CSV: a step too few between actions" common/tp_torch.c "      t = start[g] + 1;" "      t = start[g];" test-torch
mutant "Pareto front keeps a slower plan of equal peak" sim/tp_plan.c "    if (p->sim.peak < best_peak) {" "    if (p->sim.peak <= best_peak) {" test-plan
mutant "fused forwards one short" common/tp_fuse.c "  for (int j = 1; j < s->N; j++) {" "  for (int j = 1; j < s->N - 1; j++) {" test-fuse
mutant "a run's counts (train_time and the rest) not restored on resume" train/tp_tally.c "      memcpy(AT(dst, f, char), AT(src, f, const char), scalar_size[f->kind]);" "      ;" test-token-train
mutant "a profile's input bytes read as its output bytes" sim/tp_analytic.c "a->tab.in_bytes[i] = pl->in_bytes" "a->tab.in_bytes[i] = pl->out_bytes" test-profile
mutant "RoPE's backward turns forward" exec/tp_net_token.c "g.theta, -1.0f, dys[BLK_DQKV] + g.qd" "g.theta, 1.0f, dys[BLK_DQKV] + g.qd" test-token-layers
mutant "AdamW's second moment not restored on resume" exec/tp_runtime_state.c "be->iface->upload(be, S->mom, momentum, S->ns, err)" "be->iface->upload(be, S->mom, momentum, S->np, err)" test-token-train
mutant "a recomputed forward at its forward's version, not the backward's" exec/tp_runtime_acts.c "tp_net_forward(g->net, w, g->a.kept[key]" "tp_net_forward(g->net, tp_wstore_version(g->store, g->a.fver[key]), g->a.kept[key]" test-recompute
mutant "a stop cuts the run one mini-batch late" exec/tp_runtime.c "g->cut = op->mb - 1;" "g->cut = op->mb;" test-train
echo "mutants: $caught caught, $survived survived, $moved no longer found"
[ "$survived" -eq 0 ]
