#!/usr/bin/env bash
# W4 (batches of RandomResizedCrop(224) + flip, normalised bf16 CHW on the
# GPU) read from tar shards six ways, each row as pinwheel_w4_decode
# measures it: from the local disk, over HTTP (nginx on this machine's
# loopback), from S3 (moto's server on the loopback; skipped, saying so,
# without moto), over HTTP through a planned cache of CACHE_PERCENT of the
# set, and over HTTP with 20 ms added to each request (the tests' fault
# proxy), without and with the cache. Issue 34's goal: the remote rows at >= 0.9 of the local one (or
# of the server's own ceiling, storage_bench.sh). Loopback measures the
# client, not a network.
#
#   samples/bench/w4_storage.sh [BUILD_DIR] [COUNT] [SHARDS]
#     BUILD_DIR  holds samples/bench/{pinwheel_w4_decode,make_images}
#                (default: build)
#     COUNT      images make_images writes (default 4000, ~100 KB each)
#     SHARDS     tar files they are packed into (default 32: at least the
#                workers, or streams go empty)
#   Environment: DECODE (default cpu,gpu), WORKERS (default 4,14), BATCHES
#   (default 40), BATCH (default 256), REPEAT (default 3), CACHE_PERCENT
#   (default 50), PREFETCH (pinned slots; default pinwheel_w4_decode's, a
#   slot a worker), W4_ARGS (more pinwheel_w4_decode flags, e.g.
#   --read_ahead_chunks=4), ROWS (the rows to run by name, e.g.
#   local,http,s3; default all), S3=0 skips the S3 row (moto is slow to
#   fill), PYTHON,
#   NGINX (see bench_servers.sh).
set -euo pipefail
umask 022  # the shards readable by nginx workers running as another user
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build="${1:-build}"
count="${2:-4000}"
shards="${3:-32}"
w4="$build/samples/bench/pinwheel_w4_decode"
make_images="$build/samples/bench/make_images"
for tool in "$w4" "$make_images"; do
  [[ -x "$tool" ]] || { echo "w4_storage.sh: no $tool (build pinwheel_w4_decode and make_images)" >&2; exit 2; }
done
venv_python="${XDG_CACHE_HOME:-$HOME/.cache}/pinwheel/venv/bin/python"
python="${PYTHON:-$([[ -x "$venv_python" ]] && echo "$venv_python" || echo python3)}"
work="$(mktemp -d /tmp/pinwheel-w4-storage.XXXXXX)"
chmod 755 "$work"
source samples/bench/bench_servers.sh
cleanup() {
  stop_servers
  rm -rf "$work"
}
trap cleanup EXIT

"$make_images" --out="$work/images" --count="$count" --classes=100 | tail -1
"$python" samples/bench/folder_to_shards.py "$work/images" "$work/shards" --shards "$shards"
rm -rf "$work/images"
last="$(printf '%06d' $((shards - 1)))"
names="w4-{000000..$last}.tar"
total_bytes="$(du -sb "$work/shards" | cut -f1)"
cache_mib=$((total_bytes * ${CACHE_PERCENT:-50} / 100 >> 20))
echo "w4_storage.sh: $count images, $shards shards, $((total_bytes >> 20)) MiB; $(nproc) CPUs here"

# row NAME ARGS...: the configurations' summary lines, tagged with NAME.
row() {
  local name="$1"
  shift
  if [[ -n "${ROWS:-}" && ",$ROWS," != *",$name,"* ]]; then
    echo "=== $name: skipped (ROWS=$ROWS)"
    return 0
  fi
  echo "=== $name"
  "$w4" --decode="${DECODE:-cpu,gpu}" --workers="${WORKERS:-4,14}" \
    --batches="${BATCHES:-40}" --batch_size="${BATCH:-256}" --repeat="${REPEAT:-3}" \
    ${PREFETCH:+--prefetch="$PREFETCH"} ${W4_ARGS:-} "$@" |
    tee -a "$work/rows.txt" | sed "s/^w4 summary /w4 summary source=$name /" | tee -a "$work/summary.txt"
}

row local --shards="$work/shards/$names"
start_nginx "$work/shards"
echo "w4_storage.sh: $("$nginx" -v 2>&1) on 127.0.0.1:$nginx_port"
row http --shards="http://127.0.0.1:$nginx_port/$names"
if [[ "${S3:-1}" == 0 || ( -n "${ROWS:-}" && ",$ROWS," != *",s3,"* ) ]]; then
  echo "=== s3: skipped (S3=${S3:-1}, ROWS=${ROWS:-})"
elif start_script "$work/moto.out" moto_server.py --bucket w4-shards --upload "$work/shards"; then
  moto_port="$started_port"
  AWS_ENDPOINT_URL="http://127.0.0.1:$moto_port" AWS_ACCESS_KEY_ID=bench \
    AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1 row s3 --shards="s3://w4-shards/$names"
  # The server's own ceiling: a plain client (curl with its own SigV4, as
  # many at once as the loader has workers) fetching every shard, whole and
  # then in the loader's ranges (read_chunk_bytes, 8 MiB: moto reads the
  # whole object for each range, so ranges cost it more), in images a second.
  # The system's curl with the system's libcurl: a staged libcurl on
  # LD_LIBRARY_PATH (../shared/device/stage-deps.sh) may not match.
  chunk=$((8 << 20))
  (cd "$work/shards" && for f in *; do echo "$f 0-"; done) >"$work/whole.txt"
  (cd "$work/shards" && for f in *; do
    size=$(stat -c %s "$f")
    for ((at = 0; at < size; at += chunk)); do
      echo "$f $at-$((at + chunk < size ? at + chunk - 1 : size - 1))"
    done
  done) >"$work/ranges.txt"
  plain_client() {  # NAME LIST
    local start end
    for _ in 1 2 3; do
      start="$(date +%s.%N)"
      if ! xargs -P "${WORKERS%%,*}" -n 2 env -u LD_LIBRARY_PATH sh -c \
        'curl -sf -o /dev/null -r "$2" --aws-sigv4 aws:amz:us-east-1:s3 --user bench:bench "$0/$1"' \
        "http://127.0.0.1:$moto_port/w4-shards" <"$2"; then
        echo "s3 plain client ($1): skipped (curl failed; it needs --aws-sigv4, curl >= 7.75)"
        return 0
      fi
      end="$(date +%s.%N)"
      awk -v s="$start" -v e="$end" -v n="$count" -v b="$total_bytes" -v p="${WORKERS%%,*}" \
        -v name="$1" -v requests="$(wc -l <"$2")" \
        'BEGIN { printf "s3 plain client (%s): curl, %d at a time, %d requests in %.2f s: %.0f img/s, %.2f GB/s\n", name, p, requests, e - s, n / (e - s), b / (e - s) / 1e9 }'
    done
  }
  if command -v curl >/dev/null; then
    plain_client "whole shards" "$work/whole.txt"
    plain_client "8 MiB ranges" "$work/ranges.txt"
  else
    echo "s3 plain client: skipped (no curl)"
  fi
else
  echo "=== s3: skipped: moto's server did not start with $python (its error above; pip install 'moto[server]' if it is missing)"
fi
row "http+cache${CACHE_PERCENT:-50}%" --shards="http://127.0.0.1:$nginx_port/$names" \
  --cache_mib="$cache_mib"
# 20 ms more a request (the tests' fault proxy; Python, so it also caps the
# rate: storage_bench.sh's latency row shows its ceiling), without and with
# the planned cache, whose prefetch runs ahead of the streams' own reads.
if start_script "$work/proxy.out" fault_proxy.py --upstream "127.0.0.1:$nginx_port" \
     --p-delay 1 --delay-ms 20 --max-faults 1000000000; then
  row "http+20ms" --shards="http://127.0.0.1:$started_port/$names"
  row "http+20ms+cache${CACHE_PERCENT:-50}%" --shards="http://127.0.0.1:$started_port/$names" \
    --cache_mib="$cache_mib"
else
  echo "=== http+20ms: skipped: the fault proxy did not start (its error above)"
fi

echo "=== each row's median against the local one (same decode and workers)"
awk '
  /^w4 summary / {
    split($3, s, "="); split($4, d, "="); split($5, w, "=");
    sub(":", "", w[2]);
    key = d[2] " " w[2];
    rate[s[2], key] = $7;
    if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
    if (!(s[2] in have)) { have[s[2]] = 1; sources[++m] = s[2] }
  }
  END {
    for (i = 1; i <= n; i++) {
      split(keys[i], k, " ");
      line = sprintf("decode=%s workers=%s: local %s img/s", k[1], k[2], rate["local", keys[i]]);
      for (j = 1; j <= m; j++) {
        if (sources[j] == "local" || !((sources[j], keys[i]) in rate)) continue;
        line = line sprintf(", %s %s (%.3f)", sources[j], rate[sources[j], keys[i]],
                            rate[sources[j], keys[i]] / rate["local", keys[i]]);
      }
      print line;
    }
  }' "$work/summary.txt"
