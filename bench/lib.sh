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
