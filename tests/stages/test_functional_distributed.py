from __future__ import annotations

import pytest

from stages.device import DeviceInfo
from stages.functional.distributed import backend_for, run_distributed

CPU = DeviceInfo("cpu", "cpu")


def test_backend_choice():
    assert backend_for(CPU)[0] == "gloo"
    assert backend_for(DeviceInfo("rocm", "cuda:0", count=2))[:2] == ("nccl", ["cuda:0", "cuda:1"])
    one_gpu = backend_for(DeviceInfo("rocm", "cuda:0", count=1))
    assert one_gpu[0] == "gloo"
    assert "nccl needs 2 GPUs" in one_gpu[2]


@pytest.mark.slow
def test_a_skipped_collective_a_dead_rank_and_a_hung_rank_fail_only_their_cases():
    names = ["all_reduce.sum.float32", "rank0_skips_the_collective", "rank0_dies", "broadcast", "rank1_hangs"]
    results = run_distributed(CPU, timeout=4.0, names=names, module="tests.support.functional_dist_ranks")
    by_name = {r.name.removeprefix("distributed."): r for r in results}
    assert list(by_name) == names  # every case once, in order
    assert by_name["all_reduce.sum.float32"].status == "passed"
    skipped = by_name["rank0_skips_the_collective"]
    assert skipped.status == "failed"
    assert skipped.message.startswith("rank 1: ")  # only the waiting rank can tell (timeout or lost peer)
    assert "rank 0" not in skipped.message
    assert by_name["rank0_dies"].status == "failed"
    assert "SIGABRT" in by_name["rank0_dies"].message
    assert by_name["broadcast"].status == "passed"  # rerun in a fresh pair after the breakage
    assert by_name["rank1_hangs"].status == "failed"
    assert "rank 1: timed out after 4 s" in by_name["rank1_hangs"].message  # the rank's watchdog
