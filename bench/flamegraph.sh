#!/usr/bin/env bash
# Where the nodes' CPU goes under a `waymark bench` workload (issue 14): `perf record` with DWARF
# call graphs of every thread of the three node processes, drawn as a flamegraph by inferno, and a
# short table of the samples' shares by what they were doing.
#
#   bench/flamegraph.sh [-w WORKLOAD=bank] [-s SECONDS=5] [-o OUT_SVG=bench/out/flamegraph-WORKLOAD.svg]
#
# Installs `linux-perf` from Debian and `inferno` from crates.io (into target/tools) if missing,
# builds the release binary if missing. The cluster is the one `waymark bench --start-hosts 3`
# starts in a temporary directory (R=2, fsync always, 8 clients); the bench stops it, and this
# script stops by pid whatever it started that is still running on exit. Bounded: the bench runs
# SECONDS + 6 s, everything else has a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DIR="$PWD/bench" # where the Python helper imports stack_components.py from

workload=bank seconds=5 out=""
while getopts "w:s:o:" opt; do
  case $opt in
    w) workload=$OPTARG ;; s) seconds=$OPTARG ;; o) out=$OPTARG ;;
    *) echo "usage: $0 [-w bank|set|get] [-s seconds] [-o out.svg]" >&2; exit 2 ;;
  esac
done
case $workload in bank | set | get) ;; *) echo "-w must be bank, set or get" >&2; exit 2 ;; esac
[ "$seconds" -ge 1 ] && [ "$seconds" -le 60 ] || { echo "-s must be in 1..60" >&2; exit 2; }
out=${out:-bench/out/flamegraph-$workload.svg}
mkdir -p "$(dirname "$out")"

if ! command -v perf >/dev/null; then
  echo "installing linux-perf from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
fi
tools=target/tools/bin
if [ ! -x "$tools/inferno-flamegraph" ]; then
  echo "installing inferno into target/tools"
  cargo install --quiet inferno --root target/tools
fi
waymark=target/release/waymark
[ -x "$waymark" ] || cargo build --release -p waymark

work=$(mktemp -d /tmp/waymark-flame.XXXXXX)
bench_pid=""
cleanup() {
  [ -n "$bench_pid" ] && kill "$bench_pid" 2>/dev/null || true
  # Nodes of this script's cluster only: their configs are under $work.
  for pid in $(pgrep -f "node --config $work/" || true); do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

mkdir "$work/wm"
"$waymark" bench --start-hosts 3 --dir "$work/wm" --workload "$workload" --clients 8 \
  --seconds $((seconds + 5)) >"$work/bench.out" 2>&1 &
bench_pid=$!

# Wait (at most 30 s) for the three nodes, then 2 s of load before sampling.
pids=""
for _ in $(seq 1 60); do
  pids=$(pgrep -f "node --config $work/wm/" | paste -sd, - || true)
  [ "$(echo "$pids" | tr ',' '\n' | grep -c .)" -ge 3 ] && break
  kill -0 "$bench_pid" 2>/dev/null || { cat "$work/bench.out" >&2; echo "the bench exited early" >&2; exit 1; }
  sleep 0.5
done
[ -n "$pids" ] || { echo "no node started" >&2; exit 1; }
sleep 2
echo "sampling nodes $pids for $seconds s ($workload, 8 clients)"
timeout $((seconds + 30)) perf record -q -F 499 --call-graph dwarf,16384 -p "$pids" -o "$work/perf.data" \
  -- sleep "$seconds" 2>/dev/null
timeout 60 tail --pid="$bench_pid" -f /dev/null || true
grep -A1 "^run " "$work/bench.out" || true

perf script -i "$work/perf.data" 2>/dev/null | "$tools/inferno-collapse-perf" >"$work/folded"
"$tools/inferno-flamegraph" --minwidth 0.2 --title "waymark nodes, $workload, 8 clients ($seconds s)" \
  <"$work/folded" >"$out"
echo "flamegraph: $out"

# Shares of the nodes' CPU time (perf's cpu-clock weights are nanoseconds), each stack counted once under the first of these it contains (read from
# the leaf up), so that e.g. the TCP send inside a peer write counts as the peer write.
python3 - "$work/folded" <<'EOF'
import collections, os, sys
sys.path.insert(0, os.environ["BENCH_DIR"])
from stack_components import COMPONENTS as kinds  # noqa: E402
shares, total = collections.Counter(), 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    n, frames = int(n), stack.split(";")
    total += n
    kind = "other"
    for f in reversed(frames):
        hit = next((k for k, keys in kinds if any(x in f for x in keys)), None)
        if hit:
            kind = hit
            break
    shares[kind] += n
for kind, n in shares.most_common():
    print(f"{100 * n / max(total, 1):5.1f}%  {kind}")
print(f"({total / 1e9:.2f} s of CPU sampled across the three nodes)")
EOF
