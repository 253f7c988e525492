#!/usr/bin/env bash
# What TLS costs (issue 36): redis-benchmark SET and GET against a secure 3-host cluster (TLS on
# every port, a password: `cluster init`'s default) and an `--insecure` one (plaintext, no
# password), alternating, ROUNDS rounds each; prints every round and the medians' ratio.
#
#   bench/tls-cost.sh [ROUNDS] [REQUESTS]      # default 3 rounds of 20 000 requests per test
#
# Needs redis-benchmark 6+ (redis-tools, built with TLS) and a release build
# (WAYMARK=target/release/waymark by default). Bounded: each redis-benchmark run under `timeout`;
# both clusters are stopped on exit (Ctrl-C too).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
requests=${2:-20000}
clients=16
waymark=${WAYMARK:-target/release/waymark}
work=$(mktemp -d)
cleanup() {
  "$waymark" cluster stop --dir "$work/tls" >/dev/null 2>&1 || true
  "$waymark" cluster stop --dir "$work/plain" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

"$waymark" cluster init --hosts 3 --dir "$work/tls" >/dev/null
"$waymark" cluster init --hosts 3 --insecure --dir "$work/plain" >/dev/null
"$waymark" cluster start --dir "$work/tls" >/dev/null
"$waymark" cluster start --dir "$work/plain" >/dev/null

# node1's Redis port (the first host of its config), read after `cluster start` may have moved it.
port_of() { sed -n 's/^redis = "127.0.0.1:\([0-9]*\)".*/\1/p' "$1/node1/waymark.toml" | head -1; }
tls_args=(-p "$(port_of "$work/tls")" --tls --cacert "$work/tls/ca.pem" -a "$(cat "$work/tls/password")")
plain_args=(-p "$(port_of "$work/plain")")

# "SET GET" requests per second of one run.
run() {
  timeout 300 redis-benchmark "$@" -t set,get -n "$requests" -c "$clients" -r 100000 --csv 2>/dev/null \
    | awk -F'","' '/^"(SET|GET)"/ {printf "%s ", $2} END {print ""}'
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

: >"$work/tls.txt"
: >"$work/plain.txt"
echo "round  tls SET/s  tls GET/s  plain SET/s  plain GET/s"
for r in $(seq "$rounds"); do
  read -r ts tg < <(run "${tls_args[@]}")
  read -r ps pg < <(run "${plain_args[@]}")
  echo "$ts $tg" >>"$work/tls.txt"
  echo "$ps $pg" >>"$work/plain.txt"
  printf '%5s  %9s  %9s  %11s  %11s\n' "$r" "$ts" "$tg" "$ps" "$pg"
done
tset=$(awk '{print $1}' "$work/tls.txt" | median)
tget=$(awk '{print $2}' "$work/tls.txt" | median)
pset=$(awk '{print $1}' "$work/plain.txt" | median)
pget=$(awk '{print $2}' "$work/plain.txt" | median)
echo "medians: SET tls $tset / plain $pset = $(awk -v a="$tset" -v b="$pset" 'BEGIN {printf "%.3f", a / b}')x;" \
  "GET tls $tget / plain $pget = $(awk -v a="$tget" -v b="$pget" 'BEGIN {printf "%.3f", a / b}')x"
