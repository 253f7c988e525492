#!/usr/bin/env bash
# The failover window on real processes (issue 30): 12 SIGKILLs, each host of a 3-host cluster
# (R=2, fsync always) 4 times — node1, whose host runs the tree's first child, included — each on a
# fresh cluster under bank transfers from 4 clients through the two other hosts; the host is left
# down.
# For each kill: the time until every account takes a transaction through every surviving host
# (probed every 50 ms), and the transfers acknowledged per second before the kill, during that
# window and after it; then p50 and max over the kills.
#
#   bench/failover.sh
#
# It runs the ignored test `failover_window_over_twelve_kills` of
# crates/cli/tests/bank_with_a_host_left_down.rs in the release profile: the same harness as the
# test that checks the money adds up, which stops every process it started by pid, also on failure.
# About 4 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --release -p waymark --test bank_with_a_host_left_down -- --ignored --nocapture \
    failover_window_over_twelve_kills
