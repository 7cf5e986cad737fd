"""Across ranks: which rank's loader holds a data-parallel job back, and
why. Each rank summarises its loader's wait for data in a fixed-size record
(C++ ``RankWait``, loader/telemetry/rank_wait.h); the records are
all-gathered with torch.distributed and the slowest rank is named with its
bound stage in one line::

    import pinwheel.distributed
    slowest = pinwheel.distributed.slowest_rank(loader)   # on every rank
    if torch.distributed.get_rank() == 0:
        print(slowest.line)
    # slowest rank 1 of 2: Next() waits for data p50 8.2 ms, p99 9.1 ms a batch
    # (61 % of its time; the other ranks at most p50 0.1 ms); bound by
    # reads: p50 8.4 ms a batch over 1 worker (2 CPUs) against a 5.2 ms step

The slowest rank is the one waiting longest in ``next()`` for data (mean
over the last 1024 batches; a wait behind device buffers the rank's own
GPU work still holds is not for data): in data-parallel training the
others wait for it in the gradient all-reduce instead (Note [the slowest
rank] in rank_wait.h).
Without torch, gather ``rank_wait(loader, rank)`` bytes your own way and
pass them to ``slowest_rank_of``."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

from ._pinwheel import _slowest_rank_of


class SlowestRank(NamedTuple):
    rank: int
    loader_bound: bool  # it waits for data 10 % of its time or more
    line: str


def rank_wait(loader: Any, rank: int) -> bytes:
    """This rank's record (96 bytes) from ``loader.stats()``'s latencies."""
    return loader._core._rank_wait(rank)


def slowest_rank_of(records: Sequence[bytes]) -> SlowestRank:
    """The slowest of every rank's ``rank_wait`` record. InvalidArgumentError
    naming the record that is not one (size, magic, version) or a rank
    given twice."""
    return SlowestRank(*_slowest_rank_of([bytes(r) for r in records]))


def slowest_rank(loader: Any, group: Optional[Any] = None) -> SlowestRank:
    """Gathers every rank's record over torch.distributed (``group``: the
    default process group when None; any backend, the records travel as
    Python objects with ``all_gather_object``) and returns the slowest.
    Collective: every rank of the group must call it."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("slowest_rank: torch.distributed is not initialized "
                           "(call torch.distributed.init_process_group first)")
    mine = rank_wait(loader, dist.get_rank())
    records: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(records, mine, group=group)
    return slowest_rank_of(records)
