#!/bin/sh
# run.sh — fuzz every input format of timeprest for a bounded time each (`make fuzz` runs it).
#
# Engines:
#   libfuzzer  (default when clang can link -fsanitize=fuzzer): one target per format in fuzz/,
#              built with ASan and UBSan against the project's sources, seeded from its own files.
#   mutate     (fallback, needs only a C compiler): fuzz/mutate.c edits the seeds and the timeprest
#              binary of the build directory reads each result as a user's file.  Every rejection
#              must be one line on standard error with exit status 2; a signal, a sanitizer report,
#              any other status or a run over the time limit is a finding.  Build timeprest with
#              -fsanitize=address,undefined for this engine to see memory errors.
#
# Usage: fuzz/run.sh [-e libfuzzer|mutate] [-t SECONDS] [-b BUILDDIR] [-o OUTDIR] [FORMAT…]
# Formats: schedule-csv schedule-json cost model cluster device events log (default: all).
# Environment: FUZZ_SECONDS (per format, default 30), FUZZ_ENGINE, FUZZ_ARGS (extra libFuzzer
# flags), CLANG (default clang), CC (mutate engine, default cc), TP_BIN (mutate engine's binary),
# FUZZ_STRICT=1 (libFuzzer targets also count error messages over 300 bytes as findings).
# Findings go to OUTDIR/findings (default BUILDDIR/fuzz-out); the exit status is 1 when any.
set -u

src=$(cd "$(dirname "$0")/.." && pwd)
build=${TP_BUILDDIR:-$src}
seconds=${FUZZ_SECONDS:-30}
engine=${FUZZ_ENGINE:-}
out=
while getopts e:t:b:o: opt; do
  case $opt in
  e) engine=$OPTARG ;;
  t) seconds=$OPTARG ;;
  b) build=$(cd "$OPTARG" && pwd) ;;
  o) out=$OPTARG ;;
  *) sed -n '2,20p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
out=${out:-$build/fuzz-out}
formats=${*:-schedule-csv schedule-json cost model cluster device events log}
bin=${TP_BIN:-$build/timeprest}
CLANG=${CLANG:-clang}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)

case $seconds in '' | *[!0-9]*) echo "run.sh: -t: expected whole seconds, got '$seconds'" >&2; exit 2 ;; esac
[ -x "$bin" ] || { echo "run.sh: no timeprest binary at $bin (build first, or set TP_BIN / -b)" >&2; exit 2; }
[ -f "$build/config/config.h" ] || { echo "run.sh: $build is not a configured build directory (-b)" >&2; exit 2; }

# ---- seed corpora: the project's own files, and schedules and events the program writes --------
seeds=$out/seeds
rm -rf "$seeds"
for f in $formats; do mkdir -p "$seeds/$f"; done
mkdir -p "$seeds/schedule-csv" "$seeds/schedule-json" "$seeds/events"
for p in timeprest pipedream gpipe 1f1b i-timeprest pipedream-2bw; do
  "$bin" schedule -s $p -w 3 -n 3 -k 4 --format csv -o "$seeds/schedule-csv/$p.csv"
  "$bin" schedule -s $p -w 3 -n 3 -k 4 --format json -o "$seeds/schedule-json/$p.json"
done
"$bin" simulate -s timeprest -w 3 -n 2 -k 6 --csv "$seeds/events/unit.csv" -o /dev/null
"$bin" simulate -s pipedream --model mlp --cluster A -n 2 -k 5 --csv "$seeds/events/mlp.csv" -o /dev/null
[ -d "$seeds/cost" ] && cp "$src"/examples/*.cost "$seeds/cost/"
[ -d "$seeds/model" ] && cp "$src"/models/*.model "$seeds/model/"
[ -d "$seeds/cluster" ] && cp "$src"/models/clusters/*.cluster "$seeds/cluster/"
[ -d "$seeds/device" ] && cp "$src"/models/devices/*.device "$seeds/device/"
[ -d "$seeds/log" ] && cp "$src"/tests/data/train-*.csv "$seeds/log/"
if [ -d "$seeds/cost" ]; then
  printf '[stages]\nforward = 1\nbackward = 2\n' >"$seeds/cost/small.cost"
fi

status=0
found() { # FORMAT FILE WHAT: keep a finding
  mkdir -p "$out/findings/$1"
  n=$(ls "$out/findings/$1" | wc -l)
  cp "$2" "$out/findings/$1/$n.input"
  printf '%s\n' "$3" >"$out/findings/$1/$n.txt"
  echo "  finding: $out/findings/$1/$n.input: $(head -n 1 "$out/findings/$1/$n.txt")"
  status=1
}

# ---- libFuzzer ---------------------------------------------------------------------------------
libfuzzer_build() {
  obj=$out/obj
  mkdir -p "$obj" "$out/bin"
  flags="-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -fno-omit-frame-pointer -fsanitize=address,undefined
    -fno-sanitize-recover=undefined -I$build/config -I$src/common -I$src/sim -I$src/fuzz
    -DTP_DATADIR=\"$src\" -DTP_SRCDIR=\"$src\" $(pkg-config --cflags glib-2.0 json-glib-1.0)"
  libs="$(pkg-config --libs glib-2.0 json-glib-1.0) -lm"
  objs=
  for c in "$src"/common/*.c "$src"/sim/*.c; do
    o=$obj/$(basename "$c" .c).o
    if [ ! -f "$o" ] || [ "$c" -nt "$o" ]; then
      $CLANG $flags -fsanitize=fuzzer-no-link -c "$c" -o "$o" || return 1
    fi
    objs="$objs $o"
  done
  for f in $formats; do
    case $f in
    schedule-csv) main=schedule; def= ;;
    schedule-json) main=schedule; def=-DTP_FUZZ_JSON ;;
    *) main=$f; def= ;;
    esac
    # shellcheck disable=SC2086
    $CLANG $flags $def -fsanitize=fuzzer "$src/fuzz/fuzz-$main.c" $objs $libs -o "$out/bin/fuzz-$f" || return 1
  done
}

libfuzzer_run() {
  [ "${FUZZ_STRICT:-0}" = 1 ] && TP_FUZZ_MAX_MESSAGE=300 && export TP_FUZZ_MAX_MESSAGE
  for f in $formats; do
    echo "fuzz-$f: ${seconds} s"
    mkdir -p "$out/corpus/$f" "$out/crashes/$f"
    : >"$out/fuzz-$f.log"
    # libFuzzer stops at a finding: start it again on the grown corpus until the time is spent
    end=$(($(date +%s) + seconds)) rc=0 starts=0
    while [ "$(date +%s)" -lt "$end" ] && [ $starts -lt 50 ]; do
      starts=$((starts + 1))
      # shellcheck disable=SC2086
      "$out/bin/fuzz-$f" -max_total_time=$((end - $(date +%s))) -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
        -detect_leaks=0 -print_final_stats=1 -artifact_prefix="$out/crashes/$f/" ${FUZZ_ARGS:-} \
        "$out/corpus/$f" "$seeds/$f" >>"$out/fuzz-$f.log" 2>&1
      rc=$?
      [ $rc -eq 0 ] && break
    done
    runs=$(grep -E '^stat::number_of_executed_units' "$out/fuzz-$f.log" | awk '{ n += $2 } END { print n + 0 }')
    echo "  $runs inputs, $starts start(s), corpus $(ls "$out/corpus/$f" | wc -l) files"
    # one line per kind of finding (the message up to its first quote), with a count and an example
    for a in "$out/crashes/$f"/*; do
      [ -f "$a" ] || continue
      case $a in */timeout-* | */slow-unit-*) printf 'timeout (over 10 s)\t%s\n' "$a"; continue ;; esac
      why=$("$out/bin/fuzz-$f" -timeout=10 "$a" 2>&1 | grep -m 1 -E 'bad rejection|failure without|success with|ERROR: AddressSanitizer|runtime error|CRITICAL|WARNING|SUMMARY|deadly|timeout|out-of-memory' |
        sed -e 's/([a-z]*:[0-9]*): //' -e 's/[0-9][0-9]:[0-9][0-9]:[0-9.]*: //' -e 's/==[0-9]*==//' -e 's/ on address .*//' \
          -e "s/fuzz[a-z.-]*:[0-9]*/FILE/g" -e "s/\[[0-9]*\]/[N]/g" -e "s/['\"“].*//" | cut -c 1-160)
      printf '%s\t%s\n' "$why" "$a"
    done | sort | awk -F '\t' '{ n[$1]++; if (!($1 in ex)) ex[$1] = $2 } END { for (k in n) printf "  %d x %s\n      e.g. %s\n", n[k], k, ex[k] }'
    [ -n "$(ls "$out/crashes/$f")" ] && status=1
    [ $rc -eq 0 ] || [ -n "$(ls "$out/crashes/$f")" ] || { echo "  libFuzzer exited with $rc (see $out/fuzz-$f.log)"; status=1; }
  done
}

# ---- mutation fallback -------------------------------------------------------------------------
mutate_cmd() { # FORMAT FILE: the command that reads FILE as that format (printed, then evaluated)
  case $1 in
  schedule-*) echo "\"\$bin\" schedule --input \"$2\" --format csv" ;;
  cost) echo "\"\$bin\" simulate -w 4 -n 2 -k 6 --cost \"$2\" --format json" ;;
  model) echo "\"\$bin\" simulate -w 2 -n 2 -k 4 --model \"$2\" --cluster A" ;;
  cluster) echo "\"\$bin\" simulate -n 2 -k 4 --model mlp --cluster \"$2\"" ;;
  device) echo "\"\$bin\" simulate -n 2 -k 4 --model mlp --cluster \"$work/clusters/fuzz.cluster\"" ;;
  events) echo "TP_GNUPLOT=false \"\$bin\" plot timeline --events \"$2\" -o \"$work/out.png\"" ;;
  log) echo "TP_GNUPLOT=false \"\$bin\" plot convergence -i \"$2\" -o \"$work/out.png\"" ;;
  esac
}

mutate_run() {
  cc=${CC:-cc}
  $cc -O2 -o "$out/mutate" "$src/fuzz/mutate.c" || return 1
  ASAN_OPTIONS=${ASAN_OPTIONS:-exitcode=86:detect_leaks=0:abort_on_error=0}
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-exitcode=87:halt_on_error=1:print_stacktrace=1}
  export ASAN_OPTIONS UBSAN_OPTIONS
  work=$out/work
  i=0
  for f in $formats; do
    rm -rf "$work" && mkdir -p "$work/clusters" "$work/devices"
    ln -s "$src/models/devices/"*.device "$work/devices/" 2>/dev/null
    printf '[cluster]\nname = fuzz\ndevices = fuzz, fuzz\nlink_bandwidth = 1e9\nlink_latency = 1e-5\n' \
      >"$work/clusters/fuzz.cluster"
    case $f in
    schedule-csv | events | log) ext=csv ;; schedule-json) ext=json ;; device) ext=device ;; *) ext=$f ;;
    esac
    input=$work/input.$ext
    [ "$f" = cluster ] && input=$work/clusters/input.cluster
    [ "$f" = device ] && input=$work/devices/fuzz.device
    end=$(($(date +%s) + seconds))
    runs=0 rejected=0
    set -- "$seeds/$f"/*
    while [ "$(date +%s)" -lt "$end" ]; do
      i=$((i + 1)) runs=$((runs + 1))
      shift_by=$((i % $#))
      seed=$(eval "echo \"\${$((shift_by + 1))}\"")
      "$out/mutate" "$seed" "$input" "$i" || return 1
      cmd=$(mutate_cmd "$f" "$input")
      timeout 10 sh -c "bin=\"$bin\"; $cmd" >/dev/null 2>"$work/stderr"
      rc=$?
      lines=$(wc -l <"$work/stderr")
      case $rc in
      0) ;;
      1 | 2)
        [ $rc = 2 ] && rejected=$((rejected + 1))
        if [ "$lines" -ne 1 ]; then found "$f" "$input" "exit $rc with $lines lines on stderr: $cmd
$(head -c 2000 "$work/stderr")"; fi ;;
      124) found "$f" "$input" "hang (over 10 s): $cmd" ;;
      *) found "$f" "$input" "exit $rc: $cmd
$(head -c 4000 "$work/stderr")" ;;
      esac
    done
    echo "$f: $runs runs in $seconds s, $rejected rejected with exit 2"
  done
}

if [ -z "$engine" ]; then
  engine=mutate
  printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$out/probe.c"
  $CLANG -fsanitize=fuzzer "$out/probe.c" -o "$out/probe" >/dev/null 2>&1 && engine=libfuzzer
fi
case $engine in
libfuzzer) libfuzzer_build || { echo "run.sh: cannot build the libFuzzer targets" >&2; exit 2; }; libfuzzer_run ;;
mutate) mutate_run || exit 2 ;;
*) echo "run.sh: -e: expected libfuzzer or mutate, got '$engine'" >&2; exit 2 ;;
esac
[ $status = 0 ] && echo "no findings" || echo "findings in $out (see above)"
exit $status
