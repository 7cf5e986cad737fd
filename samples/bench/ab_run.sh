#!/usr/bin/env bash
# Runs two pinwheel_bench binaries (say, before and after a change)
# alternately on one machine, the order swapped each round, so that both see
# the same machine state; then prints both side by side
# (samples/bench/ab_summary.py). Hosts of one kind differ by up to 40 %
# between leases: only rows measured in one call compare.
#
# Usage: OLD=path/to/old/pinwheel_bench NEW=path/to/new/pinwheel_bench \
#          OUT=/some/dir [ROUNDS="1 2 3"] samples/bench/ab_run.sh [bench flags]
# The flags go to both binaries (default: W1/W2/W3 at the README's
# configurations, 3 repetitions a row). Writes $OUT/ab-{old,new}-<round>.txt
# (and .jsonl) and $OUT/ab-summary.txt; about 65 s a round on an H100.
# To build the old tree: git worktree add /tmp/old <commit>, then configure
# it like this one (-DCMAKE_BUILD_TYPE=Release) and build pinwheel_bench.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OLD:?set OLD to the old pinwheel_bench}" "${NEW:?set NEW to the new pinwheel_bench}"
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
args=("$@")
if ((${#args[@]} == 0)); then
  args=(--device=cuda:0 --workloads=w1,w2,w3 --repeat=3 --w1_configs=14x2,14x8
        --w2_configs=14x32x4,14x64x8 --w3_configs=4x4,14x8 --batches=200
        --w2_batches=20000 --naive_batches=5 --warmup=5)
fi
for round in ${ROUNDS:-1 2 3}; do
  if ((round % 2)); then order="old new"; else order="new old"; fi
  for which in $order; do
    bin=$OLD
    [[ $which == new ]] && bin=$NEW
    echo "== round $round $which $(date +%T)"
    timeout 150 "$bin" "${args[@]}" --json="$OUT/ab-$which-$round.jsonl" \
      >"$OUT/ab-$which-$round.txt" 2>&1
    echo "exit status $?"
  done
done
python3 samples/bench/ab_summary.py "$OUT"/ab-*-*.txt | tee "$OUT/ab-summary.txt"
