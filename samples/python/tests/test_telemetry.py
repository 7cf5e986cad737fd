"""stats() carries per-stage latencies and the stall verdict; the loader
exports them as one JSON object and as Prometheus text
(loader/telemetry/ in the C++ library)."""
import json
import time

import numpy as np
import pytest

import pinwheel
from conftest import host_loader

STAGES = {"slot_wait", "read", "copy", "ready_wait", "consumer_wait", "data_wait", "step"}


def _drain(loader, step_s=0.0):
    batches = 0
    for batch in loader:
        batches += 1
        if step_s:
            time.sleep(step_s)
    return batches


def _loader():
    data = pinwheel.ArrayDataset({"i": np.arange(160, dtype=np.int64)})
    return host_loader(data, batch_size=4, num_workers=2)


def test_stats_carry_each_stage_latency_since_build_and_recent():
    with _loader() as loader:
        batches = _drain(loader, step_s=0.002)
        stats = loader.stats()
    assert set(stats["latency"]) == STAGES
    wait = stats["latency"]["consumer_wait"]
    assert wait["total"]["count"] == batches == 40
    assert wait["recent"]["count"] == batches
    step = stats["latency"]["step"]["recent"]
    # Between the 40 batches, and after the last until the Next() that
    # ended the epoch.
    assert step["count"] == batches
    assert 0.002 <= step["p50_s"] <= step["p90_s"] <= step["p99_s"] <= step["max_s"]
    assert stats["latency"]["read"]["total"]["count"] >= batches


def test_a_slow_consumer_gets_the_consumer_verdict():
    with _loader() as loader:
        _drain(loader, step_s=0.005)
        verdict = loader.verdict()
        stats = loader.stats()
    assert verdict.startswith("consumer: "), verdict
    assert "the loader keeps up" in verdict
    assert stats["verdict_stage"] == "consumer"
    assert stats["verdict"] == verdict


def test_stats_json_is_one_object_with_every_stage_and_the_verdict():
    with _loader() as loader:
        _drain(loader)
        text = loader.stats_json()
    assert "\n" not in text
    exported = json.loads(text)
    assert exported["batches_delivered"] == 40
    assert set(exported["latency"]) == STAGES
    assert exported["verdict"]


def test_stats_prometheus_labels_every_sample_and_refuses_bad_labels():
    with _loader() as loader:
        _drain(loader)
        text = loader.stats_prometheus({"rank": "0"})
        with pytest.raises(ValueError, match="label name '0rank'"):
            loader.stats_prometheus({"0rank": "x"})
        with pytest.raises(TypeError, match="labels must be a dict"):
            loader.stats_prometheus([("rank", "0")])
    assert ('pinwheel_stage_latency_seconds{rank="0",stage="read",'
            'quantile="0.99"} ') in text
    assert 'pinwheel_batches_delivered_total{rank="0"} 40\n' in text


# Periodic reports (stats_every / stats_every_batches; C++
# LoaderOptions::stats_report).


def test_stats_path_gets_one_json_line_per_n_batches_and_a_last_one(tmp_path):
    path = tmp_path / "stats.jsonl"
    data = pinwheel.ArrayDataset({"i": np.arange(160, dtype=np.int64)})
    with host_loader(data, batch_size=4, num_workers=1, stats_every_batches=10,
                     stats_path=path) as loader:
        assert _drain(loader) == 40
    reports = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["report"] for r in reports] == [1, 2, 3, 4, 5]
    assert [r["batches_delivered"] for r in reports] == [10, 20, 30, 40, 40]
    assert [r["final"] for r in reports] == [False] * 4 + [True]
    assert set(reports[-1]["latency"]) == STAGES
    assert reports[-1]["verdict"]


def test_stats_callback_gets_a_dict_every_interval():
    got = []
    data = pinwheel.ArrayDataset({"i": np.arange(160, dtype=np.int64)})
    with host_loader(data, batch_size=4, num_workers=1, stats_every=0.03,
                     stats_callback=got.append) as loader:
        _drain(loader, step_s=0.005)  # 40 steps: >= 200 ms
    assert len(got) >= 4, got
    assert got[-1]["final"] and got[-1]["batches_delivered"] == 40
    assert got[0]["batches_delivered"] < 40
    assert loader.stats_report_error() is None


def test_a_raising_stats_callback_stops_the_reports_not_the_training():
    calls = []

    def broken(report):
        calls.append(report)
        raise RuntimeError("dashboard is down")

    data = pinwheel.ArrayDataset({"i": np.arange(160, dtype=np.int64)})
    with host_loader(data, batch_size=4, num_workers=1, stats_every_batches=5,
                     stats_callback=broken) as loader:
        assert _drain(loader) == 40
        loader.close()
        error = loader.stats_report_error()
    assert len(calls) == 1
    assert "stats_callback" in error and "dashboard is down" in error, error


def test_stats_report_arguments_are_checked():
    data = pinwheel.ArrayDataset({"i": np.arange(16, dtype=np.int64)})
    with pytest.raises(TypeError, match="stats_every must be a number"):
        host_loader(data, stats_every="1s", stats_path="x.jsonl")
    with pytest.raises(TypeError, match="stats_callback must be callable"):
        host_loader(data, stats_every=1, stats_callback=3)
    with pytest.raises(pinwheel.InvalidArgumentError, match="stats_every_batches"):
        host_loader(data, stats_every_batches=-1, stats_path="x.jsonl")
    with pytest.raises(pinwheel.InvalidArgumentError, match="an interval without a sink"):
        host_loader(data, stats_every=1.0)
    with pytest.raises(pinwheel.InvalidArgumentError, match="cannot be opened"):
        host_loader(data, stats_every=1.0, stats_path="/nonexistent-dir/s.jsonl")
