#!/usr/bin/env bash
# Issue 29's race check: N `waymark demo`s started at once (each its own 3-host cluster, two
# restores, a host killed and restarted), R rounds in a row; every demo must pass. Ports are
# picked by every demo's `cluster init` at the same moment, so this is where clusters meet.
#
#   bash scripts/demos-in-parallel.sh [-n DEMOS=4] [-r ROUNDS=10] [-o OUT_DIR=target/demos]
#
# Prints one line per round (passed, failed, seconds); keeps each demo's output in OUT_DIR;
# exits non-zero if any demo failed. Stops what it started on Ctrl-C (each demo stops its nodes).
set -euo pipefail
demos=4 rounds=10 out=target/demos
while getopts "n:r:o:" opt; do
    case $opt in
        n) demos=$OPTARG ;;
        r) rounds=$OPTARG ;;
        o) out=$OPTARG ;;
        *) echo "usage: $0 [-n DEMOS] [-r ROUNDS] [-o OUT_DIR]" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
cargo build -q --release
mkdir -p "$out"
pids=()
trap 'for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done; wait' INT TERM
failed_total=0
for round in $(seq 1 "$rounds"); do
    begun=$SECONDS
    pids=()
    for i in $(seq 1 "$demos"); do
        target/release/waymark demo >"$out/round$round-demo$i.log" 2>&1 &
        pids+=($!)
    done
    passed=0 failed=0
    for i in "${!pids[@]}"; do
        if wait "${pids[$i]}"; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
            echo "  round $round demo $((i + 1)) failed: $out/round$round-demo$((i + 1)).log"
        fi
    done
    failed_total=$((failed_total + failed))
    echo "round $round: $passed passed, $failed failed ($((SECONDS - begun)) s)"
done
echo "$((demos * rounds - failed_total)) passed, $failed_total failed"
[ "$failed_total" -eq 0 ]
