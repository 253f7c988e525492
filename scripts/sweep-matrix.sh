#!/bin/bash
# Issue 11's long run: 10 000 seeds of each simulator mode over the topology matrix, with debug
# assertions on (the `sim` profile), in chunks of 1 000 seeds that a later run skips once done, so
# an interrupted sweep resumes where it stopped. Prints one line per chunk; exits non-zero if any
# seed failed (its log names the seed and the command that reproduces it).
#
#   bash scripts/sweep-matrix.sh [-o OUT_DIR=target/sweep] [-j LANES=2] [-n SEEDS=10000] [MODE...]
#
# MODE defaults to all five: "--cuts" "--cuts --workload append" "--tree" "--tree --workload append"
# "--tree-only" (each with --matrix). On a 2-core machine the --cuts modes take minutes, the tree
# modes about an hour each.
set -euo pipefail
out=target/sweep lanes=2 seeds=10000
while getopts "o:j:n:" opt; do
  case $opt in
    o) out=$OPTARG ;;
    j) lanes=$OPTARG ;;
    n) seeds=$OPTARG ;;
    *) echo "usage: $0 [-o OUT_DIR] [-j LANES] [-n SEEDS] [MODE...]" >&2; exit 2 ;;
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
  for start in $(seq 0 1000 $((seeds - 1000))); do
    echo "$mode" "$start"
  done
done | xargs -P "$lanes" -L 1 bash -c 'chunk "$0 ${*:1:$#-1}" "${@: -1}"'

failed=$(cat "$out"/*.log | grep -c "VIOLATION" || true)
echo "violations: $failed (logs in $out)"
[ "$failed" -eq 0 ]
