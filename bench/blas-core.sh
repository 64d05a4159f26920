#!/bin/sh
# blas-core.sh — what the OpenBLAS kernels are worth on this machine: plain SGD on one stage
# (`train -s gpipe -w 1 -n 1`, mlp-deep, batch 128, K mini-batches, one BLAS thread) on the core the
# program computes with (OpenBLAS's choice, or the one the program restarts with where OpenBLAS fell
# back to its generic kernels: docs/backends.md) and on each core in CORES, R rounds, each core once
# per round in the same order; prints samples/s per round and the best per core.  Not part of
# `make check`.
# Usage: bench/blas-core.sh [BUILDDIR [K [R]]]   (env: CORES, default 'Prescott Haswell SkylakeX';
# DATA: a data directory)
set -e
b=${1:-.}
k=${2:-60}
r=${3:-3}
dataopt=""
[ -n "$DATA" ] && dataopt="--data $DATA"
chosen=$(env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 "$b/timeprest" train --help 2>&1 | sed -n 's/^Core: //p' | tail -n 1)
echo "OpenBLAS as loaded: $(env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 "$b/timeprest" train --help 2>&1 | sed -n 's/^Core: //p' | head -n 1); the program computes with: $chosen"
best=""
for round in $(seq 1 "$r"); do
  for core in program ${CORES:-Prescott Haswell SkylakeX}; do
    if [ "$core" = program ]; then
      # shellcheck disable=SC2086 # option list
      out=$(env -u OPENBLAS_CORETYPE "$b/timeprest" train -m mlp-deep -s gpipe -w 1 -n 1 --batch 128 -k "$k" \
        --order-from slots $dataopt --format json)
    else
      # shellcheck disable=SC2086
      out=$(OPENBLAS_CORETYPE=$core "$b/timeprest" train -m mlp-deep -s gpipe -w 1 -n 1 --batch 128 -k "$k" \
        --order-from slots $dataopt --format json)
    fi
    sps=$(echo "$out" | sed -n 's/.*"samples_per_second": \([0-9.e+]*\).*/\1/p' | head -n 1)
    echo "round $round  $core  $sps samples/s"
    best="$best
$core $sps"
  done
done
echo "best per core (samples/s):"
echo "$best" | awk 'NF == 2 { if (!($1 in m) || $2 > m[$1]) m[$1] = $2 } END { for (c in m) printf "  %-10s %8.1f\n", c, m[c] }'
