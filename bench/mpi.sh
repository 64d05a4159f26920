#!/bin/sh
# mpi.sh — the MPI transport's two targets (bench/RESULTS.md), in one run:
#  1. messages: bench/bench-mpi under mpirun -np 2 — latency and bandwidth of plain MPI, of the
#     transport's copying send and of its lending send (send_borrowed) at 8 B … 16 MiB, interleaved
#     round by round, best of REPS round trips per size;
#  2. training: `train` on cnn, W = 2, N = 4, batch 128, K mini-batches, with the local transport
#     (threads) and with --transport mpi (mpirun -np 2), alternating, best of R runs each, for each
#     preset; the ratio mpi / local of the samples per second.
# Usage: bench/mpi.sh [BUILDDIR [K [R [REPS [DATA [PRESETS]]]]]]   (defaults: . 20 3 30 synthetic "gpipe timeprest")
# Open MPI run as root needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (set here).
set -e
b=${1:-.}
k=${2:-20}
r=${3:-3}
reps=${4:-30}
data=${5:-synthetic}
presets=${6:-gpipe timeprest}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun="mpirun --oversubscribe --bind-to none -np"
load() { cut -d' ' -f1-3 /proc/loadavg; }
field() { sed -n "s/.*\"$1\": \\([-0-9.e+]*\\).*/\\1/p"; }
max() { if [ -z "$1" ] || [ "$(echo "$2 > $1" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi; }

echo "== messages: mpirun -np 2 bench-mpi $reps; $(nproc) cores; load average $(load)"
$mpirun 2 "$b/bench/bench-mpi" "$reps"
echo "   load average after: $(load)"
echo
echo "== training: cnn, W=2, N=4, batch 128, K=$k, data $data, best of $r runs, local and mpi alternating;"
echo "   $(nproc) cores; load average $(load)"
printf '%-10s %14s %14s %8s\n' preset "local samp/s" "mpi samp/s" "mpi/local"
args="-w 2 -n 4 --batch 128 -k $k --model cnn --data $data --format json -q"
for p in $presets; do
  bl=""; bm=""
  i=0
  while [ "$i" -lt "$r" ]; do
    l=$("$b/timeprest" train -s "$p" $args | field samples_per_second)
    m=$($mpirun 2 "$b/timeprest" train --transport mpi -s "$p" $args | field samples_per_second)
    bl=$(max "$bl" "$l"); bm=$(max "$bm" "$m")
    i=$((i + 1))
  done
  printf '%-10s %14.1f %14.1f %7.1f%%\n' "$p" "$bl" "$bm" "$(echo "100 * $bm / $bl" | bc -l)"
done
echo "   load average after: $(load)"
