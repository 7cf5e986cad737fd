"""samples/tools/kill_anywhere.py against the sample trainer (C++, the host
backend: killed 3 times, final weights and step log identical) and a toy
Python job whose resume is right, or wrong in its step log or its final
file (the harness must fail naming the first difference), plus the usage
errors. Run by ctest (kill_anywhere_test):
    python3 test_kill_anywhere.py [--train build/samples/train/train]"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(os.path.dirname(HERE), "kill_anywhere.py")
TOY = os.path.join(HERE, "toy_job.py")
TRAIN = None  # set by --train


def harness(*args, cwd):
    return subprocess.run([sys.executable, TOOL, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


class KillAnywhere(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kill_anywhere_test_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def toy(self, *job_args, kills=3, seed=1, compare=("final.txt",)):
        compares = [f"--compare={c}" for c in compare]
        return harness("--kills", str(kills), "--seed", str(seed), "--step-log", "steps.log",
                       *compares, "--resume-arg=--resume", "--min-step", "3", "--",
                       sys.executable, TOY, *job_args, cwd=self.dir)

    def test_a_job_that_resumes_exactly_passes(self):
        r = self.toy()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("killing after steps", r.stdout)
        self.assertEqual(r.stdout.count(": SIGKILL after step"), 3, r.stdout)
        self.assertIn("PASS: 3 kill(s), resumed each time; final.txt, steps.log identical",
                      r.stdout)

    def test_a_step_logged_differently_after_a_resume_fails_naming_it(self):
        r = self.toy("--bug=log", compare=())
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"FAIL: .*steps\.log: step \d+ .*differs\)?:\n"
                                   r"  reference:        step \d+ value \d+\n"
                                   r"  after the kills:  step \d+ value \d+")

    def test_a_different_final_file_fails_naming_the_offset(self):
        r = self.toy("--bug=final")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"FAIL: .*final\.txt: (first different byte at offset \d+|"
                                   r"\d+ bytes in the reference)")

    def test_the_same_seed_kills_at_the_same_steps(self):
        def points(r):
            m = re.search(r"killing after steps ([0-9, ]+) \(seed 5\)", r.stdout)
            self.assertTrue(m, r.stdout)
            return m.group(1)
        self.assertEqual(points(self.toy(seed=5)), points(self.toy(seed=5)))

    def test_usage_errors_exit_2_saying_what_is_wrong(self):
        r = harness("--kills", "0", "--compare=x", "--", "true", cwd=self.dir)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--kills 0: must be >= 1", r.stderr)
        r = harness("--compare=x", "true", cwd=self.dir)
        self.assertEqual(r.returncode, 2)
        self.assertIn("the job's command goes after --", r.stderr)
        r = harness("--", "true", cwd=self.dir)
        self.assertIn("nothing to compare", r.stderr)
        r = harness("--compare=x", "--", "false", cwd=self.dir)
        self.assertEqual(r.returncode, 2)
        self.assertIn("the reference run exited 1", r.stderr)
        r = harness("--step-log=none.log", "--", "true", cwd=self.dir)
        self.assertEqual(r.returncode, 2)
        self.assertIn("too few for 3 kills from step 1 on", r.stderr)

    def test_the_sample_trainer_resumes_bit_for_bit_after_three_kills(self):
        if TRAIN is None:
            self.skipTest("no --train given")
        r = harness("--kills", "3", "--seed", "7", "--step-log", "steps.log",
                    "--compare", "weights.bin", "--resume-arg=--resume", "--min-step", "8",
                    "--", TRAIN, "--synthetic_records=3000", "--epochs=3", "--hidden=64",
                    "--batch_size=50", "--workers=2", "--checkpoint_dir=ckpt",
                    "--checkpoint_every=7", "--step_log=steps.log", "--weights_out=weights.bin",
                    cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("reference: 180 steps", r.stdout)
        self.assertIn("PASS: 3 kill(s), resumed each time; weights.bin, steps.log identical",
                      r.stdout)


if __name__ == "__main__":
    if "--train" in sys.argv:
        i = sys.argv.index("--train")
        TRAIN = os.path.abspath(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    unittest.main(verbosity=2)
