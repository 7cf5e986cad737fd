# Sourced by the benchmark scripts that read from servers on this machine's
# loopback (storage_bench.sh, w4_storage.sh): nginx serving a folder, and
# the Python servers of tests/loader/storage (moto's S3, the fault proxy).
# Loopback measures the client, not a network.
#
# Before sourcing: `python` (with moto for the S3 server) and `work` (a
# folder the servers may write; the caller removes it). After sourcing:
#   nginx                         the nginx binary ($NGINX, nginx on PATH,
#                                 /usr/sbin/nginx or /opt/deps/usr/sbin/nginx)
#   free_port                     prints a free loopback port
#   wait_port PORT                waits until something listens (10 s)
#   start_script OUT SCRIPT ARGS  starts tests/loader/storage/SCRIPT, sets
#                                 started_port (returns 1 if it did not start)
#   start_nginx ROOT              serves ROOT, sets nginx_port
#   stop_servers                  kills what these started (call on exit)
# Run from the repository root.
nginx="${NGINX:-$(command -v nginx || true)}"
for candidate in /usr/sbin/nginx /opt/deps/usr/sbin/nginx; do
  [[ -z "$nginx" && -x "$candidate" ]] && nginx="$candidate"
done
server_pids=()

stop_servers() {
  for pid in "${server_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}

free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "bench_servers.sh: nothing listens on port $1" >&2
  return 1
}

# In this shell (not a subshell): server_pids and started_port must be seen.
start_script() {
  local out="$1"
  shift
  "$python" "tests/loader/storage/$1" "${@:2}" >"$out" &
  local pid=$!
  server_pids+=("$pid")
  for _ in $(seq 600); do
    if grep -q '^port ' "$out" 2>/dev/null; then
      started_port="$(awk '/^port /{print $2; exit}' "$out")"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

start_nginx() {
  local root="$1"
  if [[ -z "$nginx" ]]; then
    echo "bench_servers.sh: no nginx (apt-get install nginx-light, or NGINX=...)" >&2
    return 2
  fi
  nginx_port="$(free_port)"
  local conf="$work/nginx-$nginx_port"
  mkdir -p "$conf"
  cat >"$conf/nginx.conf" <<CONF
worker_processes ${NGINX_WORKERS:-4};
error_log $conf/error.log;
pid $conf/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path $conf/body;
  proxy_temp_path $conf/proxy;
  fastcgi_temp_path $conf/fastcgi;
  uwsgi_temp_path $conf/uwsgi;
  scgi_temp_path $conf/scgi;
  server {
    listen 127.0.0.1:$nginx_port;
    root $root;
  }
}
CONF
  "$nginx" -p "$conf" -e "$conf/error.log" -c "$conf/nginx.conf" -g 'daemon off;' &
  server_pids+=($!)
  wait_port "$nginx_port"
}
