#!/bin/bash
# Issue 11's long run: 10 000 seeds of each simulator mode over the topology matrix, with debug
# assertions on (the `sim` profile), in chunks of 1 000 seeds that a later run skips once done, so
# an interrupted sweep resumes where it stopped. Prints one line per chunk; exits non-zero if any
# seed failed (its log names the seed and the command that reproduces it).
#
#   bash scripts/sweep-matrix.sh [-o OUT_DIR=target/sweep] [-j LANES=2] [-n SEEDS=10000] [-f FIRST=0] [--] [MODE...]
#
# -f FIRST starts at seed FIRST (a multiple of 1 000), for a sweep continued in another out dir.
# Modes start with dashes: put `--` before them when options are given.
#
# MODE defaults to all five: "--cuts" "--cuts --workload append" "--tree" "--tree --workload append"
# "--tree-only" (each with --matrix). On a 2-core machine the --cuts modes take minutes, the tree
# modes about an hour each.
set -euo pipefail
out=target/sweep lanes=2 seeds=10000 first=0
while getopts "o:j:n:f:" opt; do
  case $opt in
    o) out=$OPTARG ;;
    j) lanes=$OPTARG ;;
    n) seeds=$OPTARG ;;
    f) first=$OPTARG ;;
    *) echo "usage: $0 [-o OUT_DIR] [-j LANES] [-n SEEDS] [-f FIRST] [MODE...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=("--cuts" "--cuts --workload append" "--tree" "--tree --workload append" "--tree-only")
cd "$(dirname "$0")/.."
cargo build -q -p waymark-sim --profile sim
sim=target/sim/waymark-sim
mkdir -p "$out"

# One chunk: MODE START. Skipped when its log already ends with a summary.
chunk() {
  local mode=$1 start=$2 tag log
  tag=$(echo "$mode" | tr -d ' -')
  log="$out/$tag-$start.log"
  if [ -s "$log" ] && tail -1 "$log" | grep -q "passed,"; then
    echo "$mode from $start: $(tail -1 "$log") (kept)"
    return
  fi
  timeout 7200 "$sim" $mode --matrix --seeds 1000 --start "$start" >"$log" 2>&1 || true
  echo "$mode from $start: $(tail -1 "$log")"
}
export -f chunk
export out sim
for mode in "${modes[@]}"; do
  for start in $(seq "$first" 1000 $((seeds - 1000))); do
    echo "$mode" "$start"
  done
done | xargs -P "$lanes" -L 1 bash -c 'chunk "$0 ${*:1:$#-1}" "${@: -1}"'

failed=$(cat "$out"/*.log | grep -c "VIOLATION" || true)
echo "violations: $failed (logs in $out)"
[ "$failed" -eq 0 ]
