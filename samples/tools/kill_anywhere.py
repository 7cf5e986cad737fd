#!/usr/bin/env python3
"""kill_anywhere.py: does your training job resume exactly after a SIGKILL?

Runs COMMAND once uninterrupted (the reference), then again in a fresh
directory, killing it with SIGKILL at random steps (seeded) and starting
it again after each kill, until it finishes; then compares what the two
runs left: the files named by --compare (final weights, byte for byte) and
the per-step log (every line the resumed job wrote for a step, replayed
steps included, must equal the reference's line for that step). Exit 0
when they match, 1 with the first difference, 2 on a usage or setup error.

    samples/tools/kill_anywhere.py --kills 3 --seed 7 \\
        --step-log steps.log --compare weights.bin \\
        --resume-arg=--resume -- \\
        build/samples/train/train --synthetic_records=3000 --epochs=3 \\
            --hidden=64 --batch_size=50 --checkpoint_dir=ckpt \\
            --checkpoint_every=7 --step_log=steps.log \\
            --weights_out=weights.bin

What the job must do:
  - run in its working directory (each run's cwd is <workdir>/reference or
    <workdir>/killed; relative paths in COMMAND land there), and resume
    from its own checkpoint there when started again (--resume-arg adds an
    argument, e.g. --resume, to every run after a kill);
  - with --step-log: append one line per step to that file (relative to
    the cwd), starting with the step number, or "step N ...", counted
    across resumes; written whole (one write a line). A kill lands right
    after the chosen step's line appears (the job may be anywhere in the
    next step, or writing a checkpoint); the kill points are drawn from
    --min-step to nine tenths of the reference's steps (a point must be
    seen before the job ends). Without --step-log the kills land
    at random times within the reference run's duration (--min-seconds on).

The per-step log is compared by step: the reference's line for step N
against every line the killed runs wrote for step N (a step trained again
after a resume must come out the same). Put whatever identifies a step's
work in that line: its sample indices, its loss printed exactly.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

STEP = re.compile(r"^(?:step\s+)?(\d+)\b")


class Usage(Exception):
    """A usage or setup error (exit 2)."""


def parse_args(argv: Optional[Sequence[str]]) -> Tuple[argparse.Namespace, List[str]]:
    p = argparse.ArgumentParser(
        prog="kill_anywhere.py",
        description="Kill a training job at random steps (SIGKILL), resume it, and compare "
                    "its result with an uninterrupted run's.",
        usage="%(prog)s [options] -- COMMAND [ARGS...]")
    p.add_argument("--kills", type=int, default=3, help="SIGKILLs in the interrupted run (>= 1)")
    p.add_argument("--seed", type=int, default=0, help="seeds the kill points")
    p.add_argument("--step-log", help="the per-step log the job appends to (relative to its cwd)")
    p.add_argument("--compare", action="append", default=[],
                   help="a file both runs leave (relative to the cwd) that must be equal byte "
                        "for byte; repeatable")
    p.add_argument("--resume-arg", action="append", default=[],
                   help="an argument added to COMMAND for every run after a kill (e.g. "
                        "--resume); repeatable")
    p.add_argument("--min-step", type=int, default=1,
                   help="kill after this step at the earliest (e.g. after the first "
                        "checkpoint); with --step-log")
    p.add_argument("--min-seconds", type=float, default=0.5,
                   help="kill this long after a start at the earliest; without --step-log")
    p.add_argument("--workdir", default="kill_anywhere.work",
                   help="where the runs happen (emptied first)")
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds one run may take before it counts as hung")
    if argv is None:
        argv = sys.argv[1:]
    argv = list(argv)
    if "--" not in argv:
        p.error("the job's command goes after --: kill_anywhere.py [options] -- COMMAND ...")
    split = argv.index("--")
    args = p.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command:
        p.error("no command after --")
    if args.kills < 1:
        p.error(f"--kills {args.kills}: must be >= 1")
    if args.min_step < 1:
        p.error(f"--min-step {args.min_step}: must be >= 1")
    if not args.step_log and not args.compare:
        p.error("nothing to compare: give --step-log and/or --compare")
    return args, command


def steps_in(path: str, offset: int = 0) -> Dict[int, List[str]]:
    """Every complete line of the step log from byte `offset` on (from the
    start when the file is shorter: the job truncated it), by step."""
    steps: Dict[int, List[str]] = {}
    if not os.path.exists(path):
        return steps
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size >= offset:
            f.seek(offset)
        text = f.read().decode(errors="replace")
    for line in text.split("\n")[:-1]:  # a line without its newline is not whole
        m = STEP.match(line)
        if m:
            steps.setdefault(int(m.group(1)), []).append(line)
    return steps


def last_step(path: str, offset: int = 0) -> int:
    steps = steps_in(path, offset)
    return max(steps) if steps else 0


def say(text: str) -> None:
    print(f"kill_anywhere: {text}", flush=True)


def start(command: List[str], cwd: str, log: str) -> subprocess.Popen:
    out = open(os.path.join(cwd, log), "ab")
    out.write(f"$ {' '.join(command)}\n".encode())
    out.flush()
    # Its own process group: the SIGKILL reaches the job's children too
    # (mpirun's ranks, a launcher's workers).
    return subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


def kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def run_whole(command: List[str], cwd: str, log: str, timeout: float) -> Tuple[int, float]:
    """Runs to the end; returns (exit status, seconds)."""
    t = time.monotonic()
    p = start(command, cwd, log)
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(p)
        raise Usage(f"{cwd}: the run took more than --timeout {timeout:g} s (see {cwd}/{log})")
    return p.returncode, time.monotonic() - t


def run_until(command: List[str], cwd: str, log: str, step_log: Optional[str],
              step: int, seconds: float, timeout: float) -> bool:
    """Runs until the step log shows `step` (or `seconds` pass, without a step
    log), then SIGKILLs it. Returns False when the job ended first."""
    # Only this run's lines count: the log holds the killed runs' too.
    path = os.path.join(cwd, step_log) if step_log is not None else ""
    offset = os.path.getsize(path) if step_log is not None and os.path.exists(path) else 0
    p = start(command, cwd, log)
    t = time.monotonic()
    while p.poll() is None:
        if step_log is not None:
            if last_step(path, offset) >= step:
                kill(p)
                return True
        elif time.monotonic() - t >= seconds:
            kill(p)
            return True
        if time.monotonic() - t > timeout:
            kill(p)
            raise Usage(f"{cwd}: the run took more than --timeout {timeout:g} s")
        time.sleep(0.002)
    return False


def first_difference(reference: str, killed: str, args: argparse.Namespace) -> Optional[str]:
    for name in args.compare:
        a, b = os.path.join(reference, name), os.path.join(killed, name)
        if not os.path.exists(a):
            return f"--compare {name}: the reference run did not write it"
        if not os.path.exists(b):
            return f"--compare {name}: the killed-and-resumed run did not write it"
        with open(a, "rb") as fa, open(b, "rb") as fb:
            da, db = fa.read(), fb.read()
        if da != db:
            if len(da) != len(db):
                return f"{name}: {len(da)} bytes in the reference, {len(db)} after the kills"
            at = next(i for i in range(len(da)) if da[i] != db[i])
            return (f"{name}: first different byte at offset {at} of {len(da)} "
                    f"(reference 0x{da[at]:02x}, after the kills 0x{db[at]:02x})")
    if args.step_log:
        ref = steps_in(os.path.join(reference, args.step_log))
        got = steps_in(os.path.join(killed, args.step_log))
        for step in sorted(set(ref) | set(got)):
            if step not in got:
                return f"{args.step_log}: step {step} is missing after the kills"
            if step not in ref:
                return f"{args.step_log}: step {step} is not in the reference run"
            for i, line in enumerate(got[step]):
                if line != ref[step][0]:
                    n = len(got[step])
                    which = "" if n == 1 else f" (trained {n} times; time {i + 1} differs)"
                    return (f"{args.step_log}: step {step}{which or ' differs'}:\n"
                            f"  reference:        {ref[step][0]}\n"
                            f"  after the kills:  {line}")
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    args, command = parse_args(argv)
    work = os.path.abspath(args.workdir)
    reference, killed = os.path.join(work, "reference"), os.path.join(work, "killed")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(reference)
    os.makedirs(killed)

    rc, seconds = run_whole(command, reference, "run.log", args.timeout)
    if rc != 0:
        raise Usage(f"the reference run exited {rc} (see {reference}/run.log)")
    rng = random.Random(args.seed)
    if args.step_log:
        total = last_step(os.path.join(reference, args.step_log))
        # The last tenth of the steps is left alone: a kill point must be
        # seen in the log before the job ends.
        candidates = list(range(args.min_step, total - max(1, total // 10)))
        if len(candidates) < args.kills:
            raise Usage(f"the reference run logged {total} steps in {args.step_log}: too few "
                        f"for {args.kills} kills from step {args.min_step} on, in the first "
                        f"nine tenths of them (a step log line starts with the step number)")
        points = sorted(rng.sample(candidates, args.kills))
        say(f"reference: {total} steps in {seconds:.1f} s; killing after steps "
            f"{', '.join(map(str, points))} (seed {args.seed})")
    else:
        hi = max(args.min_seconds, 0.9 * seconds)
        points = [rng.uniform(args.min_seconds, hi) for _ in range(args.kills)]
        say(f"reference: {seconds:.1f} s; killing {args.kills} times, "
            f"{', '.join(f'{s:.2f} s' for s in points)} after a start (seed {args.seed})")

    kills = 0
    for n, point in enumerate(points):
        run = command if n == 0 else command + args.resume_arg
        killed_it = run_until(run, killed, "run.log",
                              args.step_log, int(point) if args.step_log else 0,
                              float(point), args.timeout)
        if not killed_it:
            say(f"run {n + 1} ended before its kill point; no more kills")
            break
        where = (f"after step {point} (the log shows "
                 f"{last_step(os.path.join(killed, args.step_log))})" if args.step_log
                 else f"{point:.2f} s after its start")
        say(f"run {n + 1}: SIGKILL {where}")
        kills += 1
    rc, _ = run_whole(command + args.resume_arg, killed, "run.log", args.timeout)
    if rc != 0:
        say(f"FAIL: the last resumed run exited {rc} (see {killed}/run.log)")
        return 1
    difference = first_difference(reference, killed, args)
    if difference is not None:
        say(f"FAIL: the killed-and-resumed run differs from the reference: {difference}\n"
            f"  (the runs: {reference}, {killed}; their output in run.log)")
        return 1
    compared = ", ".join([*args.compare, *([args.step_log] if args.step_log else [])])
    say(f"PASS: {kills} kill(s), resumed each time; {compared} identical to the "
        f"uninterrupted run's")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Usage as e:
        print(f"kill_anywhere: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
