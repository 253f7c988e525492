#!/usr/bin/env bash
# The three cut strategies where they differ (issue 38, item 2): `consistent` (seed 000, the
# default), `blocking` (the cut pauses new transactions at their near from START to END) and
# `versions` (seed 002: snapshot versions run by the cut coordinator), each with a cut every 1 s
# and every 100 ms, on a 3-host cluster keeping 2 copies (fsync always), the bank workload.
# Per run: throughput, commit latency p99 and p99.9, the longest commit (the longest stall of a
# single transaction), the worst second (the fewest commits in any one-second bucket), replies
# held for real-time safety, cuts and their latency. Printed as medians over the rounds with
# their spread (min–max), and the consistent cut's ratios to the two others, each taken within
# its round.
#
#   bench/strategies.sh [-c CLIENTS=8] [-s SECONDS=10] [-r ROUNDS=3] [-o OUT_DIR=bench/out]
#   STRATEGY_SECONDS=3 bench/strategies.sh    # short mode, to check that it runs: 3 s, 1 round
#   WAYMARK_BIN=path/to/waymark bench/strategies.sh
#
# Each run is `waymark bench --start-hosts 3 --replicas 2 --strategy S --cut-every X` on a fresh
# cluster in a temporary directory (the bench stops its hosts by pid; the script stops any still
# running, by the pids they recorded, on exit or Ctrl-C). A round also runs once without cuts, as
# the reference. Rounds rotate the order of the strategies (round 1: consistent, blocking,
# versions; round 2: blocking, versions, consistent; ...) and reverse the order of the intervals
# every other round, so drift on a shared machine hits all alike. About
# ROUNDS × 7 × (SECONDS + 4) s. Writes OUT_DIR/strategies.json, its chart OUT_DIR/strategies.png
# (`waymark bench chart`: a panel per interval, each strategy's median over the rounds in a band
# of their min–max) and each run's report in OUT_DIR/strategies/.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=8 seconds=10 rounds=3 out=bench/out
[ -n "${STRATEGY_SECONDS:-}" ] && seconds=$STRATEGY_SECONDS rounds=1
while getopts "c:s:r:o:" opt; do
  case $opt in
    c) clients=$OPTARG ;; s) seconds=$OPTARG ;; r) rounds=$OPTARG ;; o) out=$OPTARG ;;
    *) echo "usage: $0 [-c clients] [-s seconds] [-r rounds] [-o out_dir]" >&2; exit 2 ;;
  esac
done
[ "$seconds" -ge 2 ] && [ "$seconds" -le 120 ] || { echo "-s must be in 2..120" >&2; exit 2; }
[ "$rounds" -ge 1 ] && [ "$rounds" -le 9 ] || { echo "-r must be in 1..9" >&2; exit 2; }
[ "$clients" -ge 1 ] && [ "$clients" -le 256 ] || { echo "-c must be in 1..256" >&2; exit 2; }
command -v python3 >/dev/null || { echo "needs python3" >&2; exit 2; }

waymark=${WAYMARK_BIN:-${CARGO_TARGET_DIR:-target}/release/waymark}
if [ ! -x "$waymark" ]; then
  echo "building $waymark"
  cargo build --release -p waymark
fi

work=$(mktemp -d /tmp/waymark-strategies.XXXXXX)
mkdir -p "$out/strategies"
rm -f "$out"/strategies/*.json
bench_pid=""
cleanup() {
  # A bench still running (Ctrl-C) stops its cluster on SIGTERM; then anything left, by pid files.
  if [ -n "$bench_pid" ]; then
    kill "$bench_pid" 2>/dev/null || true
    wait "$bench_pid" 2>/dev/null || true
  fi
  for d in "$work"/run*; do
    [ -d "$d" ] && "$waymark" cluster stop --dir "$d" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

strategies=(consistent blocking versions)
echo "cut strategies: bank, 3 hosts R=2, $clients clients, $seconds s a run, $rounds rounds, $(nproc) cores," \
  "$(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
n=0
for ((round = 1; round <= rounds; round++)); do
  # Rotate the strategies; reverse the intervals every other round; the reference (no cuts)
  # first in odd rounds, last in even ones.
  order=()
  for ((i = 0; i < 3; i++)); do order+=("${strategies[$(((round - 1 + i) % 3))]}"); done
  if ((round % 2)); then intervals=(1s 100ms); else intervals=(100ms 1s); fi
  plan=()
  ((round % 2)) && plan+=("consistent:none")
  for s in "${order[@]}"; do for x in "${intervals[@]}"; do plan+=("$s:$x"); done; done
  ((round % 2)) || plan+=("consistent:none")
  for item in "${plan[@]}"; do
    s=${item%%:*} x=${item#*:}
    n=$((n + 1))
    name="$s-$x-r$round"
    cuts=()
    [ "$x" = none ] || cuts=(--cut-every "$x")
    printf '  round %d: %-10s cuts %-6s ' "$round" "$s" "$x"
    # The bench writes its JSON even when it then exits non-zero for errors; the table shows them.
    timeout -k 30 $((seconds + 150)) "$waymark" bench --start-hosts 3 --replicas 2 --dir "$work/run$n" \
      --workload bank --strategy "$s" --clients "$clients" --seconds "$seconds" "${cuts[@]}" \
      --json "$out/strategies/$name.json" >"$work/$name.out" 2>"$work/$name.err" &
    bench_pid=$!
    rc=0
    wait "$bench_pid" || rc=$?
    bench_pid=""
    "$waymark" cluster stop --dir "$work/run$n" >/dev/null 2>&1 || true
    rm -rf "$work/run$n"
    if [ -f "$out/strategies/$name.json" ]; then
      python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["runs"][0]; l = r["latency_ms"]
print("%8.1f ops/s  p99 %7.2f  max %8.2f ms  worst second %d" % (r["throughput_per_s"], l["p99"], l["max"], r["worst_second"]))' \
        "$out/strategies/$name.json"
    else
      echo "failed (exit $rc): $(grep -m1 -i 'error' "$work/$name.err" | cut -c1-200)"
    fi
    [ "$rc" = 0 ] || cp "$work/$name.err" "$out/strategies/$name.err"
  done
done

python3 - "$out" "$clients" "$seconds" "$rounds" "$waymark" <<'PY'
import glob, json, os, re, statistics, subprocess, sys, time
out, clients, seconds, rounds, waymark = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

runs = []
for f in sorted(glob.glob(f"{out}/strategies/*.json")):
    m = re.match(r"(\w+)-(\w+)-r(\d+)\.json$", os.path.basename(f))
    if not m:
        continue
    r = json.load(open(f))["runs"][0]
    held = r.get("held") or {}
    cuts = r["cuts"]
    runs.append(dict(
        strategy=m.group(1), cut_every=m.group(2), round=int(m.group(3)), file=os.path.basename(f),
        throughput_per_s=r["throughput_per_s"], p50_ms=r["latency_ms"]["p50"], p99_ms=r["latency_ms"]["p99"],
        p999_ms=r["latency_ms"]["p999"], max_ms=r["latency_ms"]["max"], worst_second=r["worst_second"],
        median_second=r["median_second"], worst_over_median=r["worst_over_median"],
        aborted=r["aborted"], errors=r["errors"], cuts=cuts["count"], cuts_failed=cuts["failed"],
        cut_p50_ms=cuts["latency_ms_p50"], cut_max_ms=cuts["latency_ms_max"],
        held=held.get("count"), held_mean_ms=held.get("mean_ms"),
        per_second=[s["committed"] for s in r["per_second"]],
        cut_at_s=[c["at_s"] for c in cuts.get("list", [])]))

METRICS = [  # key, header, format
    ("throughput_per_s", "ops/s", ".0f"), ("p99_ms", "p99 ms", ".1f"), ("p999_ms", "p99.9 ms", ".1f"),
    ("max_ms", "longest ms", ".1f"), ("worst_second", "worst s ops", ".0f"),
]
EXTRA = [("held", "held replies", ".0f"), ("held_mean_ms", "held mean ms", ".2f"), ("aborted", "aborted", ".0f"),
         ("cuts", "cuts", ".0f"), ("cut_p50_ms", "cut p50 ms", ".1f"), ("cut_max_ms", "cut max ms", ".1f"),
         ("errors", "errors", ".0f")]

def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return dict(median=statistics.median(values), min=min(values), max=max(values), n=len(values))

def cell(s, fmt):
    if s is None:
        return "-"
    if s["n"] == 1:
        return format(s["median"], fmt)
    return f"{s['median']:{fmt}} ({s['min']:{fmt}}–{s['max']:{fmt}})"

rows = [("consistent", "none")] + [(s, x) for x in ("1s", "100ms") for s in ("consistent", "blocking", "versions")]
summary = []
for s, x in rows:
    rs = [r for r in runs if r["strategy"] == s and r["cut_every"] == x]
    entry = dict(strategy=s if x != "none" else "no cuts", cut_every=x, rounds=len(rs))
    for key, _, _ in METRICS + EXTRA:
        entry[key] = spread([r[key] for r in rs])
    summary.append(entry)

def table(metrics, title):
    print(f"\n{title}")
    head = f"{'strategy':<11}{'cut every':<10}{'n':>2}  " + "".join(f"{h:>24}" for _, h, _ in metrics)
    print(head)
    print("-" * len(head))
    for e in summary:
        if e["rounds"] == 0:
            print(f"{e['strategy']:<11}{e['cut_every']:<10}{0:>2}  (no run succeeded)")
            continue
        print(f"{e['strategy']:<11}{e['cut_every']:<10}{e['rounds']:>2}  " + "".join(f"{cell(e[k], f):>24}" for k, _, f in metrics))

table(METRICS, "medians over the rounds (min–max); longest = the longest commit of one transaction; worst s = fewest commits in one second")
table(EXTRA, "why: replies held for real-time safety, WATCH aborts, cuts taken and their round trip (medians, min–max)")

# The consistent cut against each other strategy, within each round (drift cancels), then the
# median over the rounds. Throughput and worst second: > 1 means consistent is ahead; latencies:
# < 1 means consistent is ahead.
print("\nconsistent ÷ other, each round's ratio, then the median (min–max) over the rounds;"
      " ops/s and worst second: > 1 consistent ahead; latencies: < 1 consistent ahead")
ratios = []
for x in ("1s", "100ms"):
    for other in ("blocking", "versions"):
        per = {}
        for rnd in sorted({r["round"] for r in runs}):
            c = next((r for r in runs if r["strategy"] == "consistent" and r["cut_every"] == x and r["round"] == rnd), None)
            o = next((r for r in runs if r["strategy"] == other and r["cut_every"] == x and r["round"] == rnd), None)
            if not (c and o):
                continue
            for key, _, _ in METRICS:
                if o[key]:
                    per.setdefault(key, []).append(c[key] / o[key])
        entry = dict(cut_every=x, other=other, **{k: spread(v) for k, v in per.items()})
        ratios.append(entry)
        print(f"  {x:<6} consistent ÷ {other:<9}" + "".join(
            f"  {h} {cell(entry.get(k), '.2f')}" for k, h, _ in METRICS))

report = dict(
    what="bench/strategies.sh: cut strategies on the bank, 3 hosts R=2, fsync always",
    date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), clients=clients, seconds=seconds, rounds=rounds,
    cores=os.cpu_count(), load=open("/proc/loadavg").read().split()[:3],
    waymark=subprocess.run([waymark, "--version"], capture_output=True, text=True).stdout.strip(),
    summary=summary, consistent_over_other=ratios, runs=runs)
with open(f"{out}/strategies.json", "w") as f:
    json.dump(report, f, indent=2)
print(f"\n{len(runs)} runs; JSON: {out}/strategies.json, each run's report in {out}/strategies/")
PY
# The chart reads the JSON; a chart that fails leaves the tables and the JSON above standing.
"$waymark" bench chart --from "$out/strategies.json" --out "$out/strategies.png" ||
  echo "no chart: waymark bench chart failed" >&2
