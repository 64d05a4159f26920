# train-run.sh — one resumable training run of a benchmark grid, sourced by bench/convergence.sh and
# bench/claims.sh.  run_train TAG OPTION… runs `timeprest train OPTION… $dataopt $ARGS -q` with its
# training log in $out/TAG.csv and its JSON report in $out/TAG.json; a TAG whose report exists, or
# that $out/failed.txt or $out/refused.txt names, or that $TARGETS (when set) does not list, is
# skipped (so a grid can be resumed or narrowed); a run that
# fails (a loss that turns NaN, a configuration the preset refuses) is noted in $out/failed.txt with
# its message.  Needs $b (the build directory) and $out; $dataopt and $ARGS may be empty.
run_train() {
  tag=$1
  shift
  # $TARGETS (a file of tags without their -seedS, one a line): only those run
  if [ -n "$TARGETS" ] && ! grep -qx -- "${tag%-seed*}" "$TARGETS"; then
    return 0
  fi
  if [ -s "$out/$tag.json" ] || grep -qs "^$tag \\(refused\\|failed\\)" "$out/refused.txt" "$out/failed.txt"; then
    return 0
  fi
  l0=$(cut -d' ' -f1-3 /proc/loadavg)
  # shellcheck disable=SC2086 # $dataopt and $ARGS are lists of options
  if ! "$b/timeprest" train "$@" $dataopt $ARGS -q --csv "$out/$tag.csv" --format json -o "$out/$tag.json.tmp" \
      2> "$out/$tag.err"; then
    echo "$tag failed: $(cat "$out/$tag.err")" | tee -a "$out/failed.txt"
    rm -f "$out/$tag.json.tmp" "$out/$tag.csv"
    return 0
  fi
  rm -f "$out/$tag.err"
  mv "$out/$tag.json.tmp" "$out/$tag.json"
  echo "$tag $l0 $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/loadavg.txt"
  echo "$(date -u +%H:%M:%S) $tag done (load average before / after: $l0 / $(cut -d' ' -f1-3 /proc/loadavg))"
}
