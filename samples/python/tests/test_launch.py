"""distributed="launcher" and pinwheel.launch_environment(): rank, world size
and local rank from torchrun / Open MPI / MPICH / Slurm variables, read by
the C++ LaunchEnvironment; errors name the variable."""
import numpy as np
import pytest

import pinwheel
from conftest import host_loader

VARIABLES = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
             "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
             "PMI_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"]


@pytest.fixture
def environ(monkeypatch):
    """A process environment without any launcher's variables; set some."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def set_variables(**variables):
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
    return set_variables


@pytest.fixture
def counting():
    return pinwheel.ArrayDataset({"i": np.arange(40, dtype=np.int64)})


def test_without_a_launcher_it_is_rank_0_of_1(environ):
    env = pinwheel.launch_environment()
    assert (env.launcher, env.rank, env.world_size, env.local_rank) == ("none", 0, 1, 0)


@pytest.mark.parametrize("variables,launcher", [
    (dict(RANK="3", WORLD_SIZE="4", LOCAL_RANK="1"), "torchrun"),
    (dict(OMPI_COMM_WORLD_RANK="3", OMPI_COMM_WORLD_SIZE="4",
          OMPI_COMM_WORLD_LOCAL_RANK="1"), "openmpi"),
    (dict(SLURM_PROCID="3", SLURM_NTASKS="4", SLURM_LOCALID="1"), "slurm"),
])
def test_reads_each_launchers_variables(environ, variables, launcher):
    environ(**variables)
    env = pinwheel.launch_environment()
    assert (env.launcher, env.rank, env.world_size, env.local_rank) == (launcher, 3, 4, 1)
    assert "rank 3 of 4" in repr(env)
    same = pinwheel.launch_environment(variables)  # a dict standing in for os.environ
    assert (same.launcher, same.rank, same.world_size) == (launcher, 3, 4)


def test_launcher_loader_reads_the_share_of_its_rank(environ, counting):
    environ(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    with host_loader(counting, batch_size=4, shuffle=True, seed=3,
                     distributed="launcher") as launched:
        assert launched.launch_environment.rank == 1
        got = [list(b.indices) for b in launched]
    with host_loader(counting, batch_size=4, shuffle=True, seed=3, rank=1,
                     world_size=2) as explicit:
        assert got == [list(b.indices) for b in explicit]


@pytest.mark.skipif(pinwheel.cuda_device_count() > 0, reason="checks the machine without a GPU")
def test_device_follows_local_rank_and_is_the_host_without_a_gpu(environ, counting):
    environ(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    assert pinwheel.launch_environment().local_device() == "host"
    with pinwheel.Loader(counting, batch_size=4, output="numpy",
                         distributed="launcher") as loader:  # device="auto"
        assert loader.device == "host"


@pytest.mark.skipif(pinwheel.cuda_device_count() == 0, reason="needs a GPU and the CUDA backend")
def test_device_follows_local_rank_on_a_gpu(environ, counting):
    environ(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    with pinwheel.Loader(counting, batch_size=4, output="dlpack",
                         distributed="launcher") as loader:
        assert loader.device == "cuda:0"


def test_a_bad_value_is_refused_naming_the_variable(environ, counting):
    environ(RANK="one", WORLD_SIZE="2")
    with pytest.raises(pinwheel.InvalidArgumentError, match="RANK='one'"):
        pinwheel.launch_environment()
    with pytest.raises(pinwheel.InvalidArgumentError, match="RANK='one'"):
        host_loader(counting, batch_size=4, distributed="launcher")


def test_an_incomplete_set_is_refused_naming_the_variables(environ):
    environ(OMPI_COMM_WORLD_RANK="1")
    with pytest.raises(pinwheel.InvalidArgumentError, match="OMPI_COMM_WORLD_RANK='1'"):
        pinwheel.launch_environment()


def test_rank_past_world_size_is_refused_naming_both(environ):
    environ(RANK="2", WORLD_SIZE="2", LOCAL_RANK="0")
    with pytest.raises(pinwheel.InvalidArgumentError, match="RANK='2' must be below WORLD_SIZE='2'"):
        pinwheel.launch_environment()


def test_conflicting_launchers_are_refused(environ):
    environ(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", OMPI_COMM_WORLD_RANK="1",
            OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_LOCAL_RANK="1")
    with pytest.raises(pinwheel.InvalidArgumentError, match="conflicting launchers"):
        pinwheel.launch_environment()


def test_launcher_with_explicit_rank_or_another_mode_is_refused(environ, counting):
    with pytest.raises(pinwheel.InvalidArgumentError, match="leave them unset"):
        host_loader(counting, batch_size=4, distributed="launcher", world_size=2)
    with pytest.raises(pinwheel.InvalidArgumentError, match="distributed = 'mpi'"):
        host_loader(counting, batch_size=4, distributed="mpi")
