#!/usr/bin/env bash
# Runs storage_bench (raw shard bytes from a URL into pinned memory) against
# servers on this machine's loopback: nginx serving a folder of shards (the
# HTTP row), moto's S3 server (the S3 row; skipped, saying so, without
# moto), and nginx behind the tests' fault proxy adding 20 ms to every
# request (the latency row; the proxy is Python, so it also caps the rate).
# Loopback measures the client, not a network.
#
#   samples/bench/storage_bench.sh [BUILD_DIR] [SHARDS] [SHARD_MIB]
#     BUILD_DIR  holds samples/bench/storage_bench (default: build)
#     SHARDS     shard files for the HTTP row (default 16)
#     SHARD_MIB  MiB per shard (default 64)
#   Environment: K (requests in flight, default 64), T (threads, default 4),
#   REPS (default 5), REQUEST_MIB (default 8), NGINX (the nginx binary:
#   default nginx on PATH, /usr/sbin/nginx or /opt/deps/usr/sbin/nginx, as
#   ../shared/device/stage-deps.sh with EXTRA_DEBS="nginx nginx-common"
#   unpacks it), NGINX_WORKERS (default 4), PYTHON (with moto; default the
#   venv of third_party/install-deps.sh --tests, else python3),
#   MOTO_SHARDS / MOTO_SHARD_MIB (default 4 / 16: moto is slow to fill).
set -euo pipefail
umask 022  # the shards readable by nginx workers running as another user
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build="${1:-build}"
shards="${2:-16}"
shard_mib="${3:-64}"
bench="$build/samples/bench/storage_bench"
[[ -x "$bench" ]] || { echo "storage_bench.sh: no $bench (build the target storage_bench)" >&2; exit 2; }
K="${K:-64}" T="${T:-4}" REPS="${REPS:-5}" REQUEST_MIB="${REQUEST_MIB:-8}"
venv_python="${XDG_CACHE_HOME:-$HOME/.cache}/pinwheel/venv/bin/python"
python="${PYTHON:-$([[ -x "$venv_python" ]] && echo "$venv_python" || echo python3)}"
work="$(mktemp -d /tmp/pinwheel-storage-bench.XXXXXX)"
chmod 755 "$work"  # nginx workers run as another user when started as root
source samples/bench/bench_servers.sh
[[ -n "$nginx" ]] || { echo "storage_bench.sh: no nginx (apt-get install nginx-light, or NGINX=...)" >&2; exit 2; }
cleanup() {
  stop_servers
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/data" "$work/moto"
last=$((shards - 1))
width=3
echo "storage_bench.sh: writing $shards x $shard_mib MiB of random bytes to $work/data"
for i in $(seq 0 "$last"); do
  head -c "$((shard_mib << 20))" /dev/urandom >"$work/data/$(printf "shard-%0${width}d.bin" "$i")"
done
moto_shards="${MOTO_SHARDS:-4}"
for i in $(seq 0 $((moto_shards - 1))); do
  head -c "$((${MOTO_SHARD_MIB:-16} << 20))" /dev/urandom >"$work/moto/$(printf "shard-%0${width}d.bin" "$i")"
done

start_nginx "$work/data"
port="$nginx_port"
echo "storage_bench.sh: $("$nginx" -v 2>&1) on 127.0.0.1:$port, ${NGINX_WORKERS:-4} workers; $(nproc) CPUs here"

http_urls="http://127.0.0.1:$port/shard-{$(printf "%0${width}d" 0)..$(printf "%0${width}d" "$last")}.bin"
echo "=== HTTP (nginx): the bytes, twice, compared (not timed: the CRC would be)"
"$bench" --urls="$http_urls" --in_flight="$K" --threads="$T" --request_mib="$REQUEST_MIB" --reps=2 --check |
  tail -1
echo "=== HTTP (nginx) row"
"$bench" --urls="$http_urls" --in_flight="$K" --threads="$T" --request_mib="$REQUEST_MIB" --reps="$REPS"

moto_last=$(printf "%0${width}d" $((moto_shards - 1)))
echo "=== S3 (moto) row"
if start_script "$work/moto.out" moto_server.py --bucket bench --upload "$work/moto"; then
  moto_port="$started_port"
  AWS_ENDPOINT_URL="http://127.0.0.1:$moto_port" AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench \
    AWS_REGION=us-east-1 "$bench" --urls="s3://bench/shard-{000..$moto_last}.bin" \
    --in_flight="$K" --threads="$T" --request_mib="$REQUEST_MIB" --reps=3
else
  echo "storage_bench.sh: S3 row skipped: moto's server did not start with $python (pip install 'moto[server]')"
fi

echo "=== HTTP (nginx) through the fault proxy adding 20 ms per request"
cp "$work"/moto/* "$work/data/" 2>/dev/null || true
if start_script "$work/proxy.out" fault_proxy.py --upstream "127.0.0.1:$port" \
     --p-delay 1 --delay-ms 20 --max-faults 1000000000; then
  proxy_port="$started_port"
  "$bench" --urls="http://127.0.0.1:$proxy_port/shard-{000..$moto_last}.bin" \
    --in_flight="$K" --threads="$T" --request_mib="$REQUEST_MIB" --reps=3
else
  echo "storage_bench.sh: latency row skipped: the fault proxy did not start"
fi
