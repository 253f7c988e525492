#!/usr/bin/env bash
# Waymark beside PostgreSQL and Redis on this machine, in one run (issue 14): each system without
# and with its way of taking a recovery point while it serves, and one table of ratios.
#
#   PostgreSQL  pgbench, a bank-transfer script (fsync on, synchronous_commit on), without and with
#               SELECT pg_create_restore_point('x') every second
#   Redis       redis-benchmark -t set with appendfsync always, without and with BGSAVE in a loop
#   Waymark     waymark bench --workload bank and --workload set on a 3-host cluster (R=2, fsync
#               always), without cuts, with a cut every second and every 100 ms; and like for
#               like with the peers, bank and set on one host with one copy
#   Strategies  then bench/strategies.sh (issue 38): the bank under the `consistent`, `blocking`
#               and `versions` cut strategies, a cut every 1 s and every 100 ms, ROUNDS rotated
#               rounds, medians with their spread
#   Restore     PostgreSQL's PITR replay of the WAL archived during its phase (base backup before
#               it, restore_command + recovery_target_name), against Waymark's `snapshot restore`
#               of a comparable log volume (RESTORE_MB of 4000-byte values, default 120)
#   Replicated  then bench/replicated.sh (issue 38): PostgreSQL + a synchronous standby, Valkey +
#               a replica with WAITAOF 1 1 0 after each write, etcd with three members, beside
#               Waymark's 3-host R=2 cluster, at 8, 32 and 64 clients, each system's best point
#
#   bench/peers.sh [-c CLIENTS] [-s SECONDS] [-o OUT_DIR] [-m RESTORE_MB] [-r ROUNDS]
#   PEERS_SECONDS=3 bench/peers.sh    # short mode: 3 s a phase, 1 round, 10 MB restored
#
# Installs postgresql, redis-server and redis-tools from Debian if missing (needs root), builds
# the release binary if missing. Every server it starts runs on 127.0.0.1 on a free port in a
# temporary directory and is stopped by pid on exit, also on failure or Ctrl-C. Each phase runs
# SECONDS (default 15); Waymark's comparisons with and without cuts run ROUNDS times (default 3)
# on one cluster, every other round in reverse order, and their ratio is the median of the
# rounds' (two identical runs on a shared machine differ by more than a cut costs). The whole
# script takes about 12 minutes and about 3 × RESTORE_MB × 4 of disk at most (removed at the end). OUT_DIR (default bench/out) gets the JSON reports and the
# charts.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=8 seconds=15 out=bench/out restore_mb=120 rounds=3
# Short mode, to check that the script runs: PEERS_SECONDS a phase, one round, a small restore.
[ -n "${PEERS_SECONDS:-}" ] && seconds=$PEERS_SECONDS rounds=1 restore_mb=10
while getopts "c:s:o:m:r:" opt; do
  case $opt in
    c) clients=$OPTARG ;; s) seconds=$OPTARG ;; o) out=$OPTARG ;; m) restore_mb=$OPTARG ;; r) rounds=$OPTARG ;;
    *) echo "usage: $0 [-c clients] [-s seconds] [-o out_dir] [-m restore_mb] [-r rounds]" >&2; exit 2 ;;
  esac
done
[ "$seconds" -ge 3 ] && [ "$seconds" -le 120 ] || { echo "-s must be in 3..120" >&2; exit 2; }
[ "$rounds" -ge 1 ] && [ "$rounds" -le 9 ] || { echo "-r must be in 1..9" >&2; exit 2; }
[ "$restore_mb" -ge 10 ] && [ "$restore_mb" -le 1000 ] || { echo "-m must be in 10..1000" >&2; exit 2; }

# --- tools ---------------------------------------------------------------------------------------
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-benchmark >/dev/null || missing+=(redis-tools)
ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 || missing+=(postgresql postgresql-contrib)
command -v python3 >/dev/null || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing from Debian: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The Debian package starts no cluster of ours; its service, if any, is left alone.
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
waymark=${WAYMARK_BIN:-target/release/waymark}
if [ ! -x "$waymark" ]; then
  echo "building $waymark"
  cargo build --release -p waymark
fi

# --- scratch space and cleanup -------------------------------------------------------------------
work=$(mktemp -d /tmp/waymark-peers.XXXXXX)
chmod 755 "$work"
mkdir -p "$out"
redis_pid="" loop_pid=""
# shellcheck source=bench/lib.sh
. bench/lib.sh # the script runs from the repository root (cd above); stop_pg is there
cleanup() {
  [ -n "$loop_pid" ] && kill "$loop_pid" 2>/dev/null && wait "$loop_pid" 2>/dev/null || true
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null || true
  stop_pg "$work/pg"
  stop_pg "$work/pgrestore"
  [ -d "$work/wm" ] && "$waymark" cluster stop --dir "$work/wm" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A loop in the background, stopped by pid: stop_loop.
start_loop() { ( while :; do "$@" >/dev/null 2>&1 || true; sleep "$loop_sleep"; done ) & loop_pid=$!; }
stop_loop() { kill "$loop_pid" 2>/dev/null; wait "$loop_pid" 2>/dev/null || true; loop_pid=""; }

echo "peer comparison: $clients clients, $seconds s per phase, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"

# Log volume for the restore comparison: RESTORE_MB of 4000-byte values (stored uncompressed,
# like Waymark's), then a named restore point and a WAL switch; waits (bounded) until every
# segment is archived.
pg_fill_and_archive() {
  psql_ -c "CREATE TABLE filler (id int PRIMARY KEY, pad text); ALTER TABLE filler ALTER COLUMN pad SET STORAGE EXTERNAL;"
  local rows=$((restore_mb * 250)) batch=1000 i
  for ((i = 0; i < rows; i += batch)); do
    psql_ -c "INSERT INTO filler SELECT g, repeat(md5(g::text), 125) FROM generate_series($i, $((i + batch - 1))) g"
  done
  psql_ -c "SELECT pg_create_restore_point('bench_end')" >/dev/null
  psql_ -c "SELECT pg_switch_wal()" >/dev/null
  for _ in $(seq 600); do
    [ "$(psql_ -c "SELECT count(*) FROM pg_ls_archive_statusdir() WHERE name LIKE '%.ready'")" = 0 ] && return 0
    sleep 0.1
  done
  echo "PostgreSQL did not archive its WAL within 60 s" >&2
}

# PITR: the base backup, every archived segment through restore_command, up to the restore point
# `bench_end`, then promoted. Replay rate from the server's own log: the WAL between "redo starts
# at" and "redo done at", over the elapsed time it reports for redo.
pg_pitr() {
  local port
  port=$(free_port)
  cat >>"$work/pgrestore/postgresql.conf" <<CONF
port = $port
archive_mode = off
restore_command = 'cp $work/pgarchive/%f %p'
recovery_target_name = 'bench_end'
recovery_target_action = 'promote'
CONF
  touch "$work/pgrestore/recovery.signal"
  chown -R postgres: "$work/pgrestore" && chmod 700 "$work/pgrestore"
  echo "PostgreSQL PITR: replaying $(du -sm "$work/pgarchive" | cut -f1) MB of archived WAL from the base backup"
  runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pgrestore" -l "$work/pgrun/pitr.log" start >/dev/null
  # `pg_ctl -w` would return at the consistent state, long before redo ends: wait for the promotion.
  local waited=0
  until grep -q "database system is ready to accept connections" "$work/pgrun/pitr.log" 2>/dev/null; do
    [ $((waited += 1)) -le 3000 ] || { echo "PostgreSQL PITR did not finish within 600 s: see its log" >&2; break; }
    [ "$waited" -lt 25 ] || [ -f "$work/pgrestore/postmaster.pid" ] || { echo "PostgreSQL PITR server exited: see its log" >&2; break; }
    sleep 0.2
  done
  stop_pg "$work/pgrestore"
  cp "$work/pgrun/pitr.log" "$work/pitr.log"
  cp "$work/pitr.log" "$out/postgresql-pitr.log"
  rm -rf "$work/pgrestore" "$work/pgarchive"
}

# --- PostgreSQL ----------------------------------------------------------------------------------
pg_port=$(free_port)
mkdir -p "$work/pg" "$work/pgrun"
chown postgres: "$work/pg" "$work/pgrun"
chmod 700 "$work/pg"
runuser -u postgres -- "$pgbin/initdb" -D "$work/pg" -A trust -U postgres >"$work/initdb.log" 2>&1
cat >>"$work/pg/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$work/pgrun'
fsync = on
synchronous_commit = on
wal_level = replica
max_connections = $((clients + 20))
archive_mode = on
archive_command = 'test ! -f $work/pgarchive/%f && cp %p $work/pgarchive/%f'
CONF
mkdir -p "$work/pgarchive" && chown postgres: "$work/pgarchive"
runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pg" -l "$work/pgrun/pg.log" -w -t 60 start >/dev/null
psql_() { "$pgbin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -qAtX "$@"; }
psql_ -c "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
          INSERT INTO accounts SELECT g, 1000 FROM generate_series(1, 64) g;"
# The same transfer as Waymark's bank: read both balances, then move the amount, in one
# transaction; the two accounts always differ.
write_bank_sql "$work/bank.sql"
pgbench_run() { # name
  mkdir -p "$work/$1"
  (cd "$work/$1" && timeout $((seconds + 60)) "$pgbin/pgbench" -h 127.0.0.1 -p "$pg_port" -U postgres -n \
    -c "$clients" -j "$(nproc)" -T "$seconds" -P 1 -l -f "$work/bank.sql" postgres >"$work/$1.out" 2>"$work/$1.err")
}
echo "PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}'): pgbench bank, then with a restore point every second"
# The base backup PITR starts from; every WAL segment after it is archived.
mkdir -p "$work/pgrestore" && chown postgres: "$work/pgrestore" && chmod 700 "$work/pgrestore"
runuser -u postgres -- "$pgbin/pg_basebackup" -h 127.0.0.1 -p "$pg_port" -U postgres -D "$work/pgrestore" \
  -X none -c fast >"$work/basebackup.log" 2>&1
pgbench_run pg_base
loop_sleep=1 start_loop psql_ -c "SELECT pg_create_restore_point('x')"
pgbench_run pg_rp
stop_loop
pg_fill_and_archive
stop_pg "$work/pg"
pg_pitr

# --- Redis ---------------------------------------------------------------------------------------
start_redis_aof "$work"
bench_redis() { # requests name
  timeout $((seconds * 4 + 60)) redis-benchmark -p "$redis_port" -t set -c "$clients" -n "$1" -r 100000 --csv \
    >"$work/$2.csv" 2>/dev/null
}
echo "Redis $(redis-server --version | awk '{print $3}' | cut -d= -f2): SET with appendfsync always, then with BGSAVE in a loop"
bench_redis 5000 redis_calibrate
rps=$(python3 -c "import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); print(int(float(r[0]['rps'])))" "$work/redis_calibrate.csv")
requests=$((rps * seconds))
bench_redis "$requests" redis_base
loop_sleep=0.1 start_loop redis-cli -p "$redis_port" bgsave
bench_redis "$requests" redis_bgsave
stop_loop
saves=$(redis-cli -p "$redis_port" info persistence | tr -d '\r' | awk -F: '$1 == "rdb_saves" {print $2}')
kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; redis_pid=""

# --- Waymark -------------------------------------------------------------------------------------
for w in bank set; do
  echo "Waymark: bench --workload $w, without cuts, with a cut every 1 s and every 100 ms, $rounds rounds"
  timeout $(((seconds + 3) * 3 * rounds + 180)) "$waymark" bench --start-hosts 3 --replicas 2 --workload "$w" \
    --clients "$clients" --seconds "$seconds" --cut-every 1s,100ms --compare-cuts --rounds "$rounds" \
    --json "$out/waymark-$w.json" --chart "$out/waymark-$w.png" >"$work/waymark-$w.out" 2>"$work/waymark-$w.err" ||
    { cat "$work/waymark-$w.out" "$work/waymark-$w.err" >&2; echo "waymark bench --workload $w failed" >&2; }
  cat "$work/waymark-$w.out"
done

# Like for like with the peers, which run on one host with one copy: Waymark on one host with one
# copy (one store vnode, so a transfer commits in one phase on it), fsync always, no cuts.
for w in bank set; do
  echo "Waymark: bench --workload $w on one host, one copy"
  timeout $((seconds * 2 + 120)) "$waymark" bench --start-hosts 1 --replicas 1 --workload "$w" \
    --clients "$clients" --seconds "$seconds" --json "$out/waymark-$w-one-host.json" \
    >"$work/waymark-$w-one-host.out" 2>"$work/waymark-$w-one-host.err" ||
    { rm -f "$out/waymark-$w-one-host.json"; echo "  the one-host $w run failed: $(head -c 300 "$work/waymark-$w-one-host.err")"; }
done

# Restore: a full snapshot of an empty cluster, RESTORE_MB of 4000-byte SETs, an increment, then
# `snapshot restore` of the increment (which replays the whole log of the chain).
echo "Waymark restore: $restore_mb MB of 4000-byte SETs, snapshot, snapshot restore"
"$waymark" cluster init --hosts 3 --replicas 2 --insecure --dir "$work/wm" >/dev/null  # plaintext, as Redis here
"$waymark" cluster start --dir "$work/wm" >/dev/null
wm_port=$(awk -F'"' '/^redis = /{print $2; exit}' "$work/wm/node1/waymark.toml" | cut -d: -f2)
"$waymark" snapshot create big --dir "$work/wm" >/dev/null
timeout 600 redis-benchmark -p "$wm_port" -t set -d 4000 -n $((restore_mb * 250)) -c 50 -r 100000000 -q >/dev/null 2>&1 || true
"$waymark" snapshot create big --incremental --dir "$work/wm" >"$work/wm-create.out"
"$waymark" cluster stop --dir "$work/wm" >/dev/null
timeout 600 "$waymark" snapshot restore big --increment 1 --path "$work/wm/snapshots" --to "$work/wm-restored" \
  >"$work/wm-restore.out" 2>&1 || { cat "$work/wm-restore.out" >&2; echo "snapshot restore failed" >&2; }
grep -m1 "replayed" "$work/wm-restore.out" || true
rm -rf "$work/wm" "$work/wm-restored"

# --- the table -----------------------------------------------------------------------------------
python3 - "$work" "$out" "$clients" "$seconds" <<'PY'
import csv, glob, json, re, statistics, sys
work, out, clients, seconds = sys.argv[1:5]

def pg(name):
    """tps from pgbench's summary; per-second tps from -P 1; p99 and max from the -l log."""
    text = open(f"{work}/{name}.out").read()
    tps = float(re.search(r"tps = ([\d.]+)", text).group(1))
    per_s = [float(m) for m in re.findall(r"progress: [\d.]+ s, ([\d.]+) tps", open(f"{work}/{name}.err").read())]
    lat = sorted(int(l.split()[2]) for f in glob.glob(f"{work}/{name}/pgbench_log.*") for l in open(f))
    p99 = lat[int(0.99 * (len(lat) - 1))] / 1000 if lat else 0
    return dict(tps=tps, worst=min(per_s) / statistics.median(per_s) if per_s else 0, p99=p99,
                max=lat[-1] / 1000 if lat else 0)

def redis(name):
    row = list(csv.DictReader(open(f"{work}/{name}.csv")))[0]
    return dict(tps=float(row["rps"]), worst=None, p99=float(row["p99_latency_ms"]), max=float(row["max_latency_ms"]))

def waymark(workload):
    try:
        rep = json.load(open(f"{out}/waymark-{workload}.json"))
    except (OSError, ValueError):
        return {}
    # Over the rounds: mean throughput, the worst of the worst seconds, the median p99, the max;
    # the ratio with cuts is the median of the rounds' ratios (each against its own round).
    out_ = {}
    for label in dict.fromkeys(r["label"].split(" #")[0] for r in rep["runs"]):
        rs = [r for r in rep["runs"] if r["label"].split(" #")[0] == label]
        out_[label] = dict(tps=statistics.mean(r["throughput_per_s"] for r in rs),
                           worst=min(r["worst_over_median"] for r in rs),
                           p99=statistics.median(r["latency_ms"]["p99"] for r in rs),
                           max=max(r["latency_ms"]["max"] for r in rs), rounds=len(rs))
    for o in rep.get("over_rounds", []):
        label = "cuts 1s" if o["cut_every_ms"] == 1000 else "cuts 100ms" if o["cut_every_ms"] == 100 else None
        if label in out_:
            out_[label]["ratio"] = o["throughput_median"]
            out_[label]["spread"] = (o["throughput_min"], o["throughput_max"])
    return out_

rows = []
def row(system, base_name, base, with_name, w, target):
    ratio = w.get("ratio") if w else None
    if ratio is None:
        ratio = w["tps"] / base["tps"] if base and w and base["tps"] else None
    rows.append((system, base_name, base, with_name, w, ratio, target))

p_base, p_rp = pg("pg_base"), pg("pg_rp")
row("PostgreSQL bank", "pgbench", p_base, "restore point / 1 s", p_rp, "")
r_base, r_bg = redis("redis_base"), redis("redis_bgsave")
row("Redis SET (AOF always)", "redis-benchmark", r_base, "BGSAVE loop", r_bg, "")
for wl in ("bank", "set"):
    runs = waymark(wl)
    base = runs.get("no cuts")
    for label, target in (("cuts 1s", "≥ 0.98"), ("cuts 100ms", "≥ 0.95")):
        row(f"Waymark {wl}", "no cuts", base, label.replace("cuts ", "cut / "), runs.get(label), target)

def pitr():
    """PostgreSQL's own account of redo: the WAL from "redo starts at" to "redo done at", and the
    elapsed time it reports for it."""
    try:
        text = open(f"{work}/pitr.log").read()
    except OSError:
        return None
    lsn = lambda s: (int(s.split("/")[0], 16) << 32) + int(s.split("/")[1], 16)
    start = re.search(r"redo starts at ([0-9A-F]+/[0-9A-F]+)", text)
    done = re.search(r"redo done at ([0-9A-F]+/[0-9A-F]+).*elapsed: ([\d.]+) s", text)
    if not (start and done):
        return None
    mb = (lsn(done.group(1)) - lsn(start.group(1))) / 1e6
    return dict(mb=mb, s=float(done.group(2)), rate=mb / max(float(done.group(2)), 1e-3))

def waymark_restore():
    try:
        text = open(f"{work}/wm-restore.out").read()
    except OSError:
        return None
    m = re.search(r"replayed ([\d.]+) MB of log, (\d+) records in ([\d.]+) s \(([\d.]+) MB/s", text)
    return m and dict(mb=float(m.group(1)), records=int(m.group(2)), s=float(m.group(3)), rate=float(m.group(4)))

def single_run(name):
    """The first run of one `waymark bench --json` report: a strategy's, or the one-host runs."""
    try:
        rep = json.load(open(f"{out}/waymark-{name}.json"))
    except (OSError, ValueError):
        return None
    r = rep["runs"][0]
    return dict(tps=r["throughput_per_s"], worst=r["worst_over_median"], p99=r["latency_ms"]["p99"], max=r["latency_ms"]["max"])

f = lambda v, spec: "-" if v is None else format(v, spec)
head = f"{'system':<24}{'baseline ops/s':>15}  {'with':<20}{'ops/s':>10}{'ratio':>8}{'target':>8}{'worst/med s':>12}{'p99 ms':>9}{'max ms':>9}{'max/p99':>9}"
print("\n" + head)
print("-" * len(head))
for system, _, base, with_name, w, ratio, target in rows:
    if not base or not w:
        print(f"{system:<24}{'(failed)':>15}  {with_name:<20}")
        continue
    print(f"{system:<24}{base['tps']:>15.1f}  {with_name:<20}{w['tps']:>10.1f}{f(ratio, '.3f'):>8}{target:>8}"
          f"{f(w['worst'], '.3f'):>12}{w['p99']:>9.2f}{w['max']:>9.1f}{f(w['max'] / w['p99'] if w['p99'] else None, '.2f'):>9}")
wb, ws = waymark("bank").get("no cuts"), waymark("set").get("no cuts")
print()
for wl in ("bank", "set"):
    for label, w in waymark(wl).items():
        if "spread" in w:
            lo, hi = w["spread"]
            print(f"Waymark {wl}, {label}: ratio {w['ratio']:.3f}x, the median of {w['rounds']} rounds' ratios (from {lo:.3f}x to {hi:.3f}x)")
if wb:
    print(f"Waymark bank / PostgreSQL bank (no recovery points): {wb['tps'] / p_base['tps']:.3f}x (target ≥ 1.0)")
if ws:
    print(f"Waymark SET / Redis SET (AOF always, no BGSAVE):      {ws['tps'] / r_base['tps']:.3f}x (target ≥ 0.5)")
for wl, peer, base in (("bank", "PostgreSQL bank", p_base), ("set", "Redis SET (AOF always)", r_base)):
    one = single_run(f"{wl}-one-host")
    if one:
        print(f"Waymark {wl} on one host, one copy: {one['tps']:.1f}/s, p99 {one['p99']:.2f} ms; {one['tps'] / base['tps']:.3f}x {peer}")
    else:
        print(f"Waymark {wl} on one host, one copy: not measured (see its run's output above)")
pg_r, wm_r = pitr(), waymark_restore()
if pg_r:
    print(f"PostgreSQL PITR replay: {pg_r['mb']:.1f} MB of WAL in {pg_r['s']:.2f} s = {pg_r['rate']:.1f} MB/s")
else:
    print("PostgreSQL PITR replay: failed (no redo lines in its log)")
if wm_r:
    print(f"Waymark snapshot restore: {wm_r['mb']:.1f} MB of log, {wm_r['records']} records in {wm_r['s']:.2f} s = {wm_r['rate']:.1f} MB/s"
          + (f"; {wm_r['rate'] / pg_r['rate']:.2f}x PostgreSQL's PITR (target ≥ 5x and ≥ 1000 MB/s)" if pg_r else ""))
else:
    print("Waymark snapshot restore: failed")
print(f"baselines: PostgreSQL worst second {p_base['worst']:.3f}x median, max {p_base['max']:.1f} ms vs p99 {p_base['p99']:.2f} ms;"
      f" Redis max {r_base['max']:.1f} ms vs p99 {r_base['p99']:.2f} ms")
PY
echo "Redis took ${saves:-?} BGSAVE snapshots during its loop"
echo "JSON reports and charts of the Waymark runs: $out/waymark-{bank,set}.{json,png}"

# --- the cut strategies (issue 38 item 2), a script of its own: each run on a cluster of its own --
echo
WAYMARK_BIN="$waymark" bash bench/strategies.sh -c "$clients" -s "$seconds" -r "$rounds" -o "$out" || echo "bench/strategies.sh failed" >&2

# --- the replicated peers (issue 38), a script of its own that starts and stops its servers -------
echo
bash bench/replicated.sh -s "$seconds" -o "$out" || echo "bench/replicated.sh failed" >&2
