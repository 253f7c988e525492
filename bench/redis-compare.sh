#!/usr/bin/env bash
# Waymark against Debian's redis-server on this machine, in one run: the same redis-benchmark
# command against a local 3-host Waymark cluster (R=2, fsync always) and against redis-server with
# `appendonly yes, appendfsync always`. Prints requests/s for each test and the ratio.
#
#   bench/redis-compare.sh [-n 100000] [-c 50] [-r RANGE] [-t set,get,incr]
#
# Needs redis-server and redis-benchmark (apt-get install redis-server redis-tools) and a release
# build (cargo build --release). Every server it starts it stops by PID, also on failure; it is
# bounded in time (each redis-benchmark run by `timeout`).
set -euo pipefail
cd "$(dirname "$0")/.."

requests=100000 clients=50 range="" tests="set,get,incr"
while getopts "n:c:r:t:" opt; do
  case $opt in
    n) requests=$OPTARG ;; c) clients=$OPTARG ;; r) range=$OPTARG ;; t) tests=$OPTARG ;;
    *) echo "usage: $0 [-n requests] [-c clients] [-r keyspace] [-t tests]" >&2; exit 2 ;;
  esac
done
for tool in redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install redis-server redis-tools" >&2; exit 1; }
done
waymark=target/release/waymark
[ -x "$waymark" ] || { echo "build first: cargo build --release" >&2; exit 1; }

work=$(mktemp -d /tmp/waymark-bench.XXXXXX)
redis_pid=""
cleanup() {
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null || true
  "$waymark" cluster stop --dir "$work/waymark" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=bench/lib.sh
. bench/lib.sh # the script runs from the repository root (cd above)

# redis-benchmark's -q output: "SET: 9643.20 requests per second, p50=4.095 msec"
rates() {
  local args=(-p "$1" -t "$tests" -n "$requests" -c "$clients" -q)
  [ -n "$range" ] && args+=(-r "$range")
  timeout 600 redis-benchmark "${args[@]}" | tr '\r' '\n' | grep "requests per second" | sed 's/ requests per second, p50=/ /; s/ msec//'
}

start_redis_aof "$work"

"$waymark" cluster init --hosts 3 --replicas 2 --insecure --dir "$work/waymark" >/dev/null  # plaintext, as Redis here
"$waymark" cluster start --dir "$work/waymark" >/dev/null
waymark_port=$(awk -F'"' '/^redis = /{print $2; exit}' "$work/waymark/node1/waymark.toml" | cut -d: -f2)

echo "redis-benchmark -t $tests -n $requests -c $clients ${range:+-r $range}"
echo "machine: $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ)"
redis_out=$(rates "$redis_port")
waymark_out=$(rates "$waymark_port")
printf '%-8s %14s %10s %14s %10s %8s\n' test "redis req/s" "p50 ms" "waymark req/s" "p50 ms" ratio
paste <(echo "$redis_out") <(echo "$waymark_out") | while read -r name r rp _ w wp; do
  printf "%-8s %14s %10s %14s %10s %7sx\n" "${name%:}" "$r" "$rp" "$w" "$wp" "$(awk -v w="$w" -v r="$r" 'BEGIN{printf "%.2f", w/r}')"
done
