#!/bin/sh
# layers.sh — the house's layers, held by the build (TAP): with each library's own compiler flags, a
# file in the library's folder that includes a header of a layer it may not see fails to compile
# (exec/ and sim/ never see each other, no library sees train/ or cli/, common/ sees only itself),
# and one that includes a header it may see compiles (so that the probe itself works); then no
# library leaves a symbol undefined that a higher layer defines, and none but the MPI transport's
# ends the process (nm; g_error by a look at the sources).  Run by `make check`, which
# gives the flags: TP_CC, TP_FLAGS_common, TP_FLAGS_sim, TP_FLAGS_exec, TP_FLAGS_plots, TP_FLAGS_train
# (each library's include flags), TP_GLIB (GLib's), TP_BUILDDIR, TP_SRCDIR.
set -u
b=${TP_BUILDDIR:-.}
n=0
bad=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); echo "not ok $n - $*"; bad=1; }

# compiles LAYER HEADER: whether a file in LAYER's folder including HEADER compiles with LAYER's flags
compiles() {
  eval "flags=\${TP_FLAGS_$1}"
  probe="$b/$1/tp-layer-probe-$$.c"
  printf '#include "config.h"\n#include "%s"\n' "$2" >"$probe"
  # shellcheck disable=SC2086 # $flags: the library's flags, word by word
  $TP_CC $flags ${TP_GLIB:-} -fsyntax-only "$probe" 2>/dev/null
  r=$?
  rm -f "$probe"
  return $r
}

for forbidden in "exec sim/tp_sim.h" "exec tp_sim.h" "exec train/tp_train.h" "sim exec/tp_net.h" "sim tp_net.h" \
  "train cli/tp_cli.h" "train tp_cli.h" "common sim/tp_sim.h" "common tp_net.h" "plots sim/tp_sim.h" \
  "plots exec/tp_net.h" "train tp_mpi.h" "train tp_nccl.h" "train exec/mpi/tp_mpi.h"; do
  set -- $forbidden
  if compiles "$1" "$2"; then notok "$1/ includes \"$2\": it compiled"; else ok "$1/ cannot include \"$2\""; fi
done
for allowed in "exec tp_net.h" "exec tp_schedule.h" "sim tp_sim.h" "train tp_train.h" "common tp_schedule.h" \
  "plots tp_plot.h"; do
  set -- $allowed
  if compiles "$1" "$2"; then ok "$1/ includes \"$2\""; else notok "$1/ cannot include \"$2\" (the probe is broken)"; fi
done

# symbols: undefined in a library, defined by a layer above it (or beside it, for sim and exec)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
syms() { # nm's mode (-u or --defined-only -g), files… → one name a line, sorted
  mode=$1
  shift
  # shellcheck disable=SC2086 # $mode: nm's flags
  nm $mode "$@" 2>/dev/null | awk '/:$/ || NF == 0 { next } { print $NF }' | sort -u
}
for l in common sim exec plots train; do
  [ -f "$b/libtp$l.a" ] || notok "libtp$l.a is not built in $b"
done
for pair in "common sim" "common exec" "common plots" "common train" "common cli" "sim exec" "sim train" \
  "sim cli" "exec sim" "exec train" "exec cli" "plots train" "plots cli" "train cli"; do
  set -- $pair
  syms -u "$b/libtp$1.a" >"$tmp/undefined"
  if [ "$2" = cli ]; then
    syms "--defined-only -g" "$b"/cli/*.o >"$tmp/defined"
  else
    syms "--defined-only -g" "$b/libtp$2.a" >"$tmp/defined"
  fi
  both=$(comm -12 "$tmp/undefined" "$tmp/defined" | tr '\n' ' ')
  if [ -z "$both" ]; then ok "libtp$1.a uses nothing $2 defines"; else notok "libtp$1.a uses what $2 defines: $both"; fi
done
# only main ends the process: no library but the MPI transport's calls exit, abort or MPI_Abort, or
# tp_mpi_fail (the signal module's _exit on a second signal aside)
for l in common sim exec plots train; do
  ends=$(nm -A -u "$b/libtp$l.a" 2>/dev/null | awk '{ print $1 $NF }' |
    grep -E ':(exit|abort|_Exit|quick_exit|MPI_Abort|tp_mpi_fail|_exit)$' | grep -v 'tp_signal.o:_exit$' | tr '\n' ' ')
  if [ -z "$ends" ]; then ok "libtp$l.a never ends the process"; else notok "libtp$l.a ends the process: $ends"; fi
done
# nor through GLib's g_error (a macro: no symbol of its own), outside the MPI transport
s=${TP_SRCDIR:-.}
calls=$(cd "$s" && grep -lE '\bg_error *\(' common/*.c sim/*.c exec/*.c exec/*/*.c plots/*.c train/*.c 2>/dev/null |
  grep -v '^exec/mpi/' | tr '\n' ' ')
if [ -z "$calls" ]; then ok "no library calls g_error"; else notok "g_error (which ends the process) in: $calls"; fi
echo "1..$n"
exit $bad
