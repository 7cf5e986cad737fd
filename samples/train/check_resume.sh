#!/usr/bin/env bash
# Kill/resume checks of the sample trainer (issue 10), run by ctest.
#   check_resume.sh MODE TRAIN WORKDIR [MPIEXEC]
# MODE:
#   self_kill      the trainer raises SIGKILL on itself mid-epoch
#                  (--die_after_batches), resumes; final weights must equal
#                  an uninterrupted run's byte for byte
#   external_kill  this script sends SIGKILL at a random moment after the
#                  first checkpoint appeared (maybe while one is being
#                  written); the same comparison
#   corrupt        --resume refuses a missing, truncated, bit-flipped or
#                  foreign checkpoint with exit 1 and a message naming the
#                  file and what is wrong (no crash)
#   elastic        2 ranks under mpirun die mid-epoch; 1 rank resumes: every
#                  sample after the resume point is read exactly once, none
#                  before it, and later epochs are whole (--check_coverage)
# The device is the trainer's default (auto): the host backend without a GPU,
# the GPU where there is one (so the GPU path must be deterministic too).
set -u
mode=$1
train=$2
work=$3
mpiexec=${4:-}

fail() {
  echo "FAIL ($mode): $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
cd "$work" || fail "cannot enter $work"

# run LOG ARGS...: runs the trainer, output to LOG; returns its exit status.
run() {
  local log=$1
  shift
  echo "\$ $train $*" >>"$log"
  "$train" "$@" >>"$log" 2>&1
}

show() {
  echo "---- $1"
  cat "$1"
}

case "$mode" in
self_kill)
  # 3000 samples at batch 50: 60 batches per epoch. Checkpoints every 7
  # steps (77 is the last before the kill), death at step 80: mid-epoch 2,
  # three steps after the last checkpoint (they are trained again).
  common=(--synthetic_records=3000 --epochs=3 --hidden=64 --batch_size=50)
  run full.log "${common[@]}" --weights_out=full.bin || { show full.log; fail "uninterrupted run failed"; }
  run killed.log "${common[@]}" --checkpoint_dir=ckpt --checkpoint_every=7 --die_after_batches=80
  rc=$?
  show killed.log
  [ "$rc" -eq 137 ] || fail "the run with --die_after_batches=80 exited $rc; want 137 (SIGKILL)"
  run resumed.log "${common[@]}" --checkpoint_dir=ckpt --checkpoint_every=7 --resume \
    --check_coverage --weights_out=resumed.bin || { show resumed.log; fail "resume failed"; }
  show resumed.log
  grep -q "resume: from ckpt/train.ckpt: epoch 2, after 17 of its batches (77 steps" resumed.log ||
    fail "did not resume at epoch 2 after batch 17 (step 77)"
  grep -q "after the resume point (position 850 of 3000) exactly once, and none before it" resumed.log ||
    fail "the resumed epoch's coverage line is missing"
  cmp full.bin resumed.bin || fail "final weights differ from the uninterrupted run's"
  # Killed right after the checkpoint of an epoch's last step (before the
  # loader saw the epoch end): the resumed epoch has nothing left.
  run killed_end.log "${common[@]}" --checkpoint_dir=ckpt_end --checkpoint_every=60 --die_after_batches=60
  rc=$?
  show killed_end.log
  [ "$rc" -eq 137 ] || fail "the run with --die_after_batches=60 exited $rc; want 137 (SIGKILL)"
  run resumed_end.log "${common[@]}" --checkpoint_dir=ckpt_end --resume --weights_out=resumed_end.bin ||
    { show resumed_end.log; fail "resume at the epoch's end failed"; }
  show resumed_end.log
  grep -q "resume: from ckpt_end/train.ckpt: epoch 1, after 60 of its batches" resumed_end.log ||
    fail "did not resume after the last batch of epoch 1"
  cmp full.bin resumed_end.bin || fail "final weights after an end-of-epoch resume differ"
  echo "PASS: killed at step 80, resumed from step 77; killed at step 60, resumed from step 60: final weights identical ($(grep 'final weights' resumed.log))"
  ;;
external_kill)
  # The killed run checkpoints every 2 steps (the weights do not depend on
  # it): a sync, a write and two fsyncs per 2 steps keep even a fast GPU run
  # going well past the kill, which lands 0-90 ms after the first checkpoint
  # appeared, often while a later one is being written.
  common=(--synthetic_records=20001 --epochs=3 --hidden=256 --batch_size=50)
  run full.log "${common[@]}" --weights_out=full.bin || { show full.log; fail "uninterrupted run failed"; }
  show full.log
  echo "\$ $train ${common[*]} --checkpoint_dir=ckpt --checkpoint_every=2 (killed by this script)" >killed.log
  "$train" "${common[@]}" --checkpoint_dir=ckpt --checkpoint_every=2 >>killed.log 2>&1 &
  pid=$!
  # Wait for the first checkpoint, then a random 0-90 ms more.
  for _ in $(seq 1 3000); do
    [ -e ckpt/train.ckpt ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  sleep "0.0$((RANDOM % 10))"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid"
  rc=$?
  show killed.log
  [ "$rc" -eq 137 ] || fail "the trainer exited $rc before the SIGKILL landed; want 137 (make the run longer)"
  [ -e ckpt/train.ckpt ] || fail "no checkpoint was written before the kill"
  # (Resumed with rarer checkpoints: they do not change the weights.)
  run resumed.log "${common[@]}" --checkpoint_dir=ckpt --checkpoint_every=50 --resume \
    --check_coverage --weights_out=resumed.bin || { show resumed.log; fail "resume failed"; }
  show resumed.log
  grep -q "resume: from ckpt/train.ckpt" resumed.log || fail "no resume line"
  cmp full.bin resumed.bin || fail "final weights differ from the uninterrupted run's"
  echo "PASS: killed externally; $(grep '^resume: from' resumed.log); final weights identical"
  ;;
corrupt)
  common=(--synthetic_records=3002 --epochs=1 --hidden=16 --batch_size=100)
  # expect_refusal LOG PATTERN: --resume must exit 1 with PATTERN in its error.
  expect_refusal() {
    local log=$1 pattern=$2
    run "$log" "${common[@]}" --checkpoint_dir=ckpt --resume
    local rc=$?
    show "$log"
    [ "$rc" -eq 1 ] || fail "$log: --resume exited $rc; want 1 (an error, not a crash)"
    grep -q "train: error: .*$pattern" "$log" || fail "$log: no error matching '$pattern'"
  }
  expect_refusal missing.log "no checkpoint to resume from: ckpt/train.ckpt does not exist"
  run write.log "${common[@]}" --checkpoint_dir=ckpt || { show write.log; fail "writing a checkpoint failed"; }
  [ -s ckpt/train.ckpt ] || fail "no checkpoint written at the end of the epoch"
  cp ckpt/train.ckpt good.ckpt
  size=$(stat -c %s good.ckpt)
  # A flipped byte in the middle (the weights).
  cp good.ckpt ckpt/train.ckpt
  byte=$(od -An -tu1 -j $((size / 2)) -N1 good.ckpt | tr -d ' ')
  printf "$(printf '\\%03o' $(((byte + 1) % 256)))" |
    dd of=ckpt/train.ckpt bs=1 seek=$((size / 2)) conv=notrunc status=none
  expect_refusal flipped.log "ckpt/train.ckpt ($size bytes): corrupted: CRC-32C of bytes"
  # Truncated (as a torn write would leave it, were it not atomic).
  head -c $((size - 100)) good.ckpt >ckpt/train.ckpt
  expect_refusal truncated.log "ckpt/train.ckpt ($((size - 100)) bytes): truncated"
  # Something else entirely.
  echo "not a checkpoint" >ckpt/train.ckpt
  expect_refusal foreign.log "ckpt/train.ckpt (17 bytes): not a trainer checkpoint"
  # A checkpoint of another model.
  cp good.ckpt ckpt/train.ckpt
  run other.log --synthetic_records=3002 --epochs=1 --hidden=17 --batch_size=100 --checkpoint_dir=ckpt --resume
  rc=$?
  show other.log
  [ "$rc" -eq 1 ] && grep -q "train: error: .*ckpt/train.ckpt holds an MLP .* -> 16 -> " other.log ||
    fail "a checkpoint of another shape was not refused by name"
  # And the intact one resumes (nothing left to train: it was the end).
  cp good.ckpt ckpt/train.ckpt
  run intact.log "${common[@]}" --checkpoint_dir=ckpt --resume || { show intact.log; fail "the intact checkpoint did not resume"; }
  show intact.log
  grep -q "nothing left to train" intact.log || fail "resuming a finished job should train nothing"
  echo "PASS: missing, flipped, truncated, foreign and mismatched checkpoints refused by name"
  ;;
elastic)
  [ -n "$mpiexec" ] || fail "no mpiexec given"
  # 4000 samples, 2 ranks at batch 40: 50 steps per epoch; death at step 73
  # (mid-epoch 2, after the checkpoint of step 70: position 20 x 40 x 2 =
  # 1600); one rank resumes at batch 80 (the same global batch) and must
  # read the other 2400 samples of epoch 2 exactly once, then all of
  # epoch 3. (The data directory is train_two_ranks_cpu's: both hold the
  # mpirun lock.)
  # --device=cpu: two ranks cannot share one GPU through NCCL (a GPU machine
  # with one GPU runs this test too).
  common=(--device=cpu --synthetic_records=4000 --epochs=3 --hidden=32 --check_coverage)
  "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$train" "${common[@]}" --batch_size=40 \
    --checkpoint_dir=ckpt --checkpoint_every=10 --die_after_batches=73 >killed.log 2>&1
  rc=$?
  show killed.log
  [ "$rc" -ne 0 ] || fail "the 2-rank run was not killed"
  grep -q "die_after_batches: raising SIGKILL after batch 73" killed.log || fail "the ranks did not die at step 73"
  run resumed.log "${common[@]}" --batch_size=80 --checkpoint_dir=ckpt --resume ||
    { show resumed.log; fail "the 1-rank resume failed"; }
  show resumed.log
  grep -q "resume: from ckpt/train.ckpt: epoch 2, after 20 of its batches (70 steps in all; written by 2 rank(s)" resumed.log ||
    fail "did not resume the 2-rank checkpoint of step 70"
  grep -q "coverage: epoch 2: the 1 rank(s) together read each of the 2400 training samples after the resume point (position 1600 of 4000) exactly once, and none before it" resumed.log ||
    fail "epoch 2 (resumed) not proven covered"
  grep -q "coverage: epoch 3: the 1 rank(s) together read each of the 4000 training samples exactly once" resumed.log ||
    fail "epoch 3 not proven covered"
  echo "PASS: 2 ranks killed at step 73, 1 rank resumed from step 70 with every remaining sample once"
  ;;
*)
  fail "unknown mode"
  ;;
esac
