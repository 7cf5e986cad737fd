"""pinwheel.TarShards and pinwheel.RecordFile over URLs (loader/storage/):
http:// from a range-capable server and s3:// from moto's S3 server, both
started here on the loopback (tests/loader/storage/*.py). A server that
cannot start fails the test: CI installs moto
(third_party/install-deps.sh --tests)."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import pinwheel
from conftest import host_loader
from test_images import all_batches, write_shards

SERVERS = pathlib.Path(__file__).resolve().parents[3] / "tests" / "loader" / "storage"


def start(script, *args):
    """Starts a server script; returns (process, "http://127.0.0.1:<port>")."""
    process = subprocess.Popen([sys.executable, str(SERVERS / script), *args],
                               stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    if not line.startswith("port "):
        process.kill()
        process.wait()
        pytest.fail(f"{script} did not start (printed {line!r}; its stderr is above)",
                    pytrace=False)
    return process, f"http://127.0.0.1:{int(line.split()[1])}"


@pytest.fixture
def served(tmp_path, monkeypatch):
    """tmp_path/data served over HTTP and as s3://pinwheel-py/ from moto."""
    # Loopback requests never go through a proxy the environment names.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    data = tmp_path / "data"
    data.mkdir()
    processes = []
    try:
        http, http_url = start("range_http_server.py", "--root", str(data))
        processes.append(http)
        yield data, http_url, lambda: start_moto(data, processes)
    finally:
        for p in processes:
            p.kill()
            p.wait()


def start_moto(data, processes):
    moto, moto_url = start("moto_server.py", "--bucket", "pinwheel-py", "--upload", str(data))
    processes.append(moto)
    return moto_url


@pytest.fixture
def s3_environment(monkeypatch):
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return monkeypatch


def test_tar_shards_over_http_and_s3_give_the_local_samples(served, s3_environment):
    data, http_url, moto = served
    paths = write_shards(data, shards=2, per_shard=6)
    local = all_batches(host_loader(pinwheel.TarShards(paths, size=16, seed=4), batch_size=4))
    over_http = pinwheel.TarShards(f"{http_url}/shard-{{000..001}}.tar", size=16, seed=4)
    http_images, http_labels = all_batches(host_loader(over_http, batch_size=4))
    s3_environment.setenv("AWS_ENDPOINT_URL", moto())
    over_s3 = pinwheel.TarShards(["s3://pinwheel-py/shard-000.tar",
                                  "s3://pinwheel-py/shard-001.tar"], size=16, seed=4)
    s3_images, s3_labels = all_batches(host_loader(over_s3, batch_size=4))
    assert sorted(local[1].tolist()) == [0, 1, 2, 3, 4, 5, 100, 101, 102, 103, 104, 105]
    for images, labels in ((http_images, http_labels), (s3_images, s3_labels)):
        assert labels.tolist() == local[1].tolist()
        np.testing.assert_array_equal(images, local[0])


def test_record_file_over_http_and_s3_reads_every_record(served, s3_environment):
    data, http_url, moto = served
    images = np.arange(50 * 12, dtype=np.uint8).reshape(50, 12)
    labels = np.arange(50, dtype=np.int64) * 3
    pinwheel.write_record_file(data / "r.pwr", {"image": images, "label": labels})
    s3_environment.setenv("AWS_ENDPOINT_URL_S3", moto())
    for url in (f"{http_url}/r.pwr", "s3://pinwheel-py/r.pwr"):
        dataset = pinwheel.RecordFile(url)
        assert len(dataset) == 50
        with host_loader(dataset, batch_size=8, shuffle=True) as loader:
            got_images, got_labels = all_batches(loader)
        order = np.argsort(got_labels)
        assert got_labels[order].tolist() == labels.tolist()
        np.testing.assert_array_equal(got_images[order], images)


def test_missing_urls_and_bad_patterns_raise_naming_them(served):
    _, http_url, _ = served
    with pytest.raises(pinwheel.NotFoundError, match="nope.pwr"):
        pinwheel.RecordFile(f"{http_url}/nope.pwr")
    with pytest.raises(pinwheel.NotFoundError, match="nope.tar"):
        pinwheel.TarShards([f"{http_url}/nope.tar"], size=16)
    with pytest.raises(pinwheel.InvalidArgumentError, match=r"shard-\{0\.\.3.*position"):
        pinwheel.expand_shards("s3://b/shard-{0..3.tar")
    assert pinwheel.expand_shards("s3://b/x-{08..10}.tar") == [
        "s3://b/x-08.tar", "s3://b/x-09.tar", "s3://b/x-10.tar"]
    with pytest.raises(TypeError, match="pattern must be a str"):
        pinwheel.expand_shards(3)


def test_a_cache_under_tar_shards_fetches_each_block_once_and_warms_a_restart(served, tmp_path):
    data, http_url, _ = served
    paths = write_shards(data, shards=3, per_shard=5)
    total = sum(os.path.getsize(p) for p in paths)
    local = all_batches(host_loader(pinwheel.TarShards(paths, size=16, seed=4), batch_size=4))
    url = f"{http_url}/shard-{{000..002}}.tar"
    cache_dir = tmp_path / "cache"
    cached = pinwheel.TarShards(url, size=16, seed=4, cache_bytes=1 << 20,
                                cache_dir=cache_dir, cache_block_bytes=4096)
    loader = host_loader(cached, batch_size=4, num_workers=2)
    for epoch in range(2):
        images, labels = all_batches(loader)
        order = np.argsort(labels)
        assert labels[order].tolist() == sorted(local[1].tolist()), f"epoch {epoch}"
        if epoch == 0:  # a sample's crop is a function of the epoch
            assert np.array_equal(images[order], local[0][np.argsort(local[1])])
    loader.close()
    stats = cached.cache_stats()
    # The cache holds the whole set: each block fetched once, in epoch 0.
    assert stats["bytes_fetched"] == total, stats
    assert stats["bytes_fetched_again"] == 0 and stats["unplanned_reads"] == 0, stats
    assert stats["hits"] > 0 and 0 < stats["hit_rate"] <= 1, stats
    assert set(stats["bytes_fetched_by_epoch"]) <= {0, 1}, stats
    # A new job with the same folder starts warm and fetches nothing.
    again = pinwheel.TarShards(url, size=16, seed=4, cache_bytes=1 << 20,
                               cache_dir=cache_dir, cache_block_bytes=4096)
    assert again.cache_stats()["warm_bytes"] == total
    with host_loader(again, batch_size=4, num_workers=2) as warm_loader:
        assert sorted(all_batches(warm_loader)[1].tolist()) == sorted(local[1].tolist())
    assert again.cache_stats()["bytes_fetched"] == 0


def test_cache_arguments_are_checked_naming_them(tmp_path):
    paths = write_shards(tmp_path, shards=1, per_shard=2)
    assert pinwheel.TarShards(paths, size=16).cache_stats() is None
    with pytest.raises(pinwheel.InvalidArgumentError, match="cache_dir = .* needs cache_bytes"):
        pinwheel.TarShards(paths, size=16, cache_dir=tmp_path / "c")
    with pytest.raises(TypeError, match="cache_bytes must be an int"):
        pinwheel.TarShards(paths, size=16, cache_bytes="1G")
    with pytest.raises(pinwheel.InvalidArgumentError, match="cache_bytes"):
        pinwheel.TarShards(paths, size=16, cache_bytes=100)
    with pytest.raises(pinwheel.InvalidArgumentError, match="smaller than one block"):
        pinwheel.TarShards(paths, size=16, cache_bytes=8192, cache_block_bytes=16384)
    with pytest.raises(TypeError, match="cache_dir must be a str"):
        pinwheel.TarShards(paths, size=16, cache_bytes=8192, cache_block_bytes=4096, cache_dir=3)
    # A local list is cached too (a slow network file system).
    local = pinwheel.TarShards(paths, size=16, cache_bytes=1 << 20, cache_block_bytes=4096)
    with host_loader(local, batch_size=2) as loader:
        assert len(all_batches(loader)[1]) == 2
    assert local.cache_stats()["bytes_fetched"] == sum(os.path.getsize(p) for p in paths)


def test_a_cache_under_a_record_file_over_http_fetches_each_byte_once(served):
    data, http_url, _ = served
    images = np.arange(400 * 100, dtype=np.uint8).reshape(400, 100)
    labels = np.arange(400, dtype=np.int64)
    pinwheel.write_record_file(data / "r.pwr", {"image": images, "label": labels})
    dataset = pinwheel.RecordFile(f"{http_url}/r.pwr", cache_bytes=1 << 20,
                                  cache_block_bytes=4096)
    assert len(dataset) == 400
    # Opening reads the header (up to 64 KiB, here the whole file) before
    # any plan exists: those reads are unplanned; none after them may be.
    at_open = dataset.cache_stats()["unplanned_reads"]
    loader = host_loader(dataset, batch_size=16, shuffle=True, seed=3)
    for _ in range(2):
        got_images, got_labels = all_batches(loader)
        order = np.argsort(got_labels)
        assert got_labels[order].tolist() == labels.tolist()
        np.testing.assert_array_equal(got_images[order], images)
    loader.close()
    stats = dataset.cache_stats()
    # Room for the whole file: each block once, and the reads were planned.
    assert stats["bytes_fetched"] == os.path.getsize(data / "r.pwr"), stats
    assert stats["bytes_fetched_again"] == 0, stats
    assert stats["unplanned_reads"] == at_open, stats
    assert pinwheel.RecordFile(data / "r.pwr").cache_stats() is None
    with pytest.raises(pinwheel.InvalidArgumentError, match="RecordFile: cache_bytes"):
        pinwheel.RecordFile(data / "r.pwr", cache_bytes=10)
