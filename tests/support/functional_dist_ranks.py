"""A rank program with two extra distributed cases that misbehave, for the tests:
``python -m tests.support.functional_dist_ranks`` (same arguments as stages.functional.dist_rank)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from stages.functional import dist_rank


def _rank0_skips_the_collective(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
    import torch

    if rank == 0:
        return  # rank 0 never joins: with gloo only rank 1 notices, after the timeout
    dist.all_reduce(torch.ones(4))


def _rank1_hangs(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
    if rank == 1:
        time.sleep(600)  # not in a collective at all: only the wall-clock limit ends this


def _rank0_dies(dist: Any, rank: int, world: int, dev: Any, seed: int) -> None:
    if rank == 0:
        os.abort()


dist_rank.CASES["rank0_skips_the_collective"] = _rank0_skips_the_collective
dist_rank.CASES["rank1_hangs"] = _rank1_hangs
dist_rank.CASES["rank0_dies"] = _rank0_dies

if __name__ == "__main__":
    sys.exit(dist_rank.main())
