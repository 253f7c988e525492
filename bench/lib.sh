# Shared by the bench scripts (sourced, not run).

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts redis-server on 127.0.0.1 with `appendfsync always` in DIR/redis; sets redis_port and
# redis_pid (the caller's EXIT trap stops it by pid) and waits until it answers PING (bounded).
start_redis_aof() { # dir
  redis_port=$(free_port)
  mkdir -p "$1/redis"
  redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$1/redis" --save "" \
    --appendonly yes --appendfsync always --daemonize no >"$1/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

stop_pid() { # pid [signal]: the signal (TERM), up to 10 s, then KILL
  kill -"${2:-TERM}" "$1" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
}
stop_pg() { # data directory: the postmaster's pid from postmaster.pid, fast shutdown
  [ -f "$1/postmaster.pid" ] || return 0
  local pid
  pid=$(head -1 "$1/postmaster.pid")
  kill -INT "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
fail() { # message log...: the message and the logs' last lines, then exit (the trap cleans up)
  echo "$1" >&2
  shift
  tail -n 5 "$@" >&2 || true
  exit 1
}
wait_until() { # limit_s command...: until the command succeeds, at most limit_s seconds
  local limit=$1
  shift
  for _ in $(seq $((limit * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "gave up after ${limit} s waiting for: $*" >&2
  return 1
}

# Starts Valkey (or Redis) BINARY on 127.0.0.1:PORT in the background with `appendfsync always`,
# its files in WORK/NAME and its log in WORK/NAME.log, a replica of REPLICAOF_PORT if given. The
# caller records `$!` to stop it.
start_valkey_aof() { # binary work name port [replicaof_port]
  mkdir -p "$2/$3"
  "$1" --port "$4" --bind 127.0.0.1 --dir "$2/$3" --save "" --appendonly yes --appendfsync always \
    --daemonize no ${5:+--replicaof 127.0.0.1 "$5"} >"$2/$3.log" 2>&1 &
}

# Whether the Valkey replica on 127.0.0.1:PORT has its link to the primary up (INFO replication).
valkey_replica_up() { # port
  python3 - "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
s.sendall(b"INFO replication\r\n")
data = b""
while b"master_link_status" not in data and len(data) < 65536:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
sys.exit(0 if b"master_link_status:up" in data else 1)
PY
}

# PostgreSQL primary with a synchronous streaming standby, as the bench scripts compare with:
# PGBIN's binaries, data in WORK/pgp and WORK/pgs, sockets and logs in WORK/pgrun, the bank's 64
# accounts created. Sets pgp_port and pgs_port and defines psql_ (on the primary) and pg_sync
# (whether the standby is still synchronous), which call PGBIN's psql through pg_bin (set here,
# as they run after this returns). The caller's trap stops both with stop_pg.
start_pg_sync_pair() { # pgbin work max_connections
  pg_bin=$1
  local pgbin=$1 work=$2
  pgp_port=$(free_port) pgs_port=$(free_port)
  mkdir -p "$work/pgp" "$work/pgrun" "$work/pgs"
  chown postgres: "$work/pgp" "$work/pgrun" "$work/pgs"
  chmod 700 "$work/pgp" "$work/pgs"
  runuser -u postgres -- "$pgbin/initdb" -D "$work/pgp" -A trust -U postgres >"$work/initdb.log" 2>&1 ||
    fail "initdb failed" "$work/initdb.log"
  cat >>"$work/pgp/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $pgp_port
unix_socket_directories = '$work/pgrun'
fsync = on
synchronous_commit = on
wal_level = replica
max_wal_senders = 4
max_connections = $3
CONF
  runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pgp" -l "$work/pgrun/pgp.log" -w -t 60 start >/dev/null ||
    fail "the primary did not start" "$work/pgrun/pgp.log"
  psql_() { "$pg_bin/psql" -h 127.0.0.1 -p "$pgp_port" -U postgres -d postgres -qAtX "$@"; }
  psql_ -c "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
            INSERT INTO accounts SELECT g, 1000 FROM generate_series(1, 64) g;"
  # The standby: a base backup streamed from the primary, its own port, following the primary.
  runuser -u postgres -- timeout 120 "$pgbin/pg_basebackup" -h 127.0.0.1 -p "$pgp_port" -U postgres -D "$work/pgs" \
    -X stream -c fast >"$work/basebackup.log" 2>&1 || fail "pg_basebackup failed" "$work/basebackup.log"
  echo "port = $pgs_port" >>"$work/pgs/postgresql.conf"
  echo "primary_conninfo = 'host=127.0.0.1 port=$pgp_port user=postgres application_name=standby1'" \
    >>"$work/pgs/postgresql.auto.conf"
  touch "$work/pgs/standby.signal"
  chown -R postgres: "$work/pgs" && chmod 700 "$work/pgs"
  runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pgs" -l "$work/pgrun/pgs.log" -w -t 60 start >/dev/null ||
    fail "the standby did not start" "$work/pgrun/pgs.log"
  # Only now synchronous: a commit waits until the standby has flushed its WAL.
  psql_ -c "ALTER SYSTEM SET synchronous_standby_names = 'standby1'" -c "SELECT pg_reload_conf()" >/dev/null
  pg_sync() { [ "$(psql_ -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'")" = sync ]; }
  wait_until 60 pg_sync || fail "the standby did not become synchronous" "$work/pgrun/pgs.log"
}

# The pgbench script of the bank transfer, the same as Waymark's: read both balances, then move
# the amount, in one transaction; the two accounts (of 64) always differ.
write_bank_sql() { # file
  cat >"$1" <<'SQL'
\set a random(1, 64)
\set b 1 + (:a + random(0, 62)) % 64
\set amount random(1, 50)
BEGIN;
SELECT balance FROM accounts WHERE id IN (:a, :b);
UPDATE accounts SET balance = balance + CASE WHEN id = :a THEN -:amount ELSE :amount END WHERE id IN (:a, :b);
COMMIT;
SQL
}
