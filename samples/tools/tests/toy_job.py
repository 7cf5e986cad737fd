"""A tiny training job for kill_anywhere's tests: 40 steps of 10 ms, a
state (step, value) checkpointed every 3 steps to state.json (atomically),
one line per step in steps.log, the final value in final.txt.
  --resume       continue from state.json
  --bug=log      after a resume, log a step's value off by one
  --bug=final    after a resume, write a different final value"""
import json
import os
import sys
import time

resume = "--resume" in sys.argv
bug = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--bug=")), "")
step, value = 0, 1
if resume and os.path.exists("state.json"):
    with open("state.json") as f:
        step, value = json.load(f)
resumed = resume and step > 0
log = os.open("steps.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
while step < 40:
    step += 1
    value = (value * 31 + step) % 1000003
    time.sleep(0.01)
    shown = value + 1 if resumed and bug == "log" else value
    os.write(log, f"step {step} value {shown}\n".encode())
    if step % 3 == 0:
        with open("state.tmp", "w") as f:
            json.dump([step, value], f)
        os.replace("state.tmp", "state.json")
with open("final.txt", "w") as f:
    f.write(str(value + (7 if resumed and bug == "final" else 0)))
