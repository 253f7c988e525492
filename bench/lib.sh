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
