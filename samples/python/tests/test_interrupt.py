"""Ctrl-C (SIGINT) during iteration stops cleanly: KeyboardInterrupt reaches
the training loop (also while next() waits for a batch that will not come
soon), close() and interpreter exit join every thread. Each case runs a
child Python process and sends it SIGINT once it says it is iterating; a
hang fails the case through the subprocess timeout."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

HEADER = textwrap.dedent("""
    import sys, threading, time
    import numpy as np
    import pinwheel

    gate = threading.Event()  # set once interrupted: lets blocked reads finish

    class Data(pinwheel.Dataset):
        def __init__(self, block_from):
            super().__init__({"x": ("i64", (16,))}, size=10_000)
            self.block_from = block_from
        def read(self, index, sample):
            if index >= self.block_from:
                gate.wait()          # a read that waits (GIL released)
            sample["x"][:] = index
""")


def run_child(body, timeout=60):
    child = subprocess.Popen([sys.executable, "-c", HEADER + textwrap.dedent(body)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        line = child.stdout.readline()
        assert line.strip() == "iterating", line + child.stderr.read()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=timeout)
    except BaseException:
        child.kill()
        child.communicate()
        raise
    return child.returncode, line + out, err


def test_interrupt_while_waiting_for_a_batch_raises_keyboard_interrupt_and_closes():
    code, out, err = run_child("""
        loader = pinwheel.Loader(Data(block_from=64), batch_size=8, num_workers=2,
                                 device="cpu", output="numpy")
        try:
            for i, batch in enumerate(loader):
                if i == 2:
                    print("iterating", flush=True)   # batches 8.. will block
        except KeyboardInterrupt:
            print("interrupted")
            gate.set()
            loader.close()
            print("closed")
    """)
    assert code == 0, err
    assert out.split() == ["iterating", "interrupted", "closed"]
    assert "Fatal" not in err


def test_uncaught_interrupt_exits_without_hanging():
    code, out, err = run_child("""
        import atexit
        atexit.register(gate.set)  # runs before pinwheel's own exit hook
        loader = pinwheel.Loader(Data(block_from=64), batch_size=8, num_workers=3,
                                 device="cpu", output="numpy")
        for i, batch in enumerate(loader):
            if i == 2:
                print("iterating", flush=True)
    """)
    assert code in (-signal.SIGINT, 1, 130), (code, err)
    assert "KeyboardInterrupt" in err
    assert "Fatal" not in err and "terminate called" not in err


def test_interrupt_inside_read_on_the_main_thread_raises_keyboard_interrupt():
    code, out, err = run_child("""
        class Spin(pinwheel.Dataset):
            def __init__(self):
                super().__init__({"x": ("i64", ())}, size=100)
            def read(self, index, sample):
                if index == 50:
                    print("iterating", flush=True)
                    while True:
                        time.sleep(0.01)   # KeyboardInterrupt is raised here
                sample["x"][...] = index
        loader = pinwheel.Loader(Spin(), batch_size=10, num_workers=0,
                                 device="cpu", output="numpy")
        try:
            for batch in loader:
                pass
        except KeyboardInterrupt:
            print("interrupted")
            loader.close()
            print("closed")
    """)
    assert code == 0, err
    assert out.split() == ["iterating", "interrupted", "closed"]


def test_interrupt_while_iterating_over_an_array_dataset_stops_cleanly():
    code, out, err = run_child("""
        data = pinwheel.ArrayDataset({"x": np.zeros((4096, 1024), np.uint8)})
        with pinwheel.Loader(data, batch_size=64, num_workers=2, device="cpu",
                             output="numpy") as loader:
            try:
                print("iterating", flush=True)
                while True:
                    for batch in loader:
                        batch["x"].sum()
            except KeyboardInterrupt:
                print("interrupted")
        print("closed", loader.closed)
    """)
    assert code == 0, err
    assert out.split() == ["iterating", "interrupted", "closed", "True"]
