"""Collective bandwidth: nccl-tests' bus bandwidth from the rank events, the metrics and the gate."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path

import pytest
import yaml

from gatekeeper.contract.verdict import Outcome
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import parse_gates
from stages import compatibility_check
from stages._stage import CommonOptions, Recorder, StageContext
from stages.compat.bandwidth import (
    BANDWIDTH_OPS,
    CPU_SIZES_MB,
    GPU_SIZES_MB,
    bus_factor,
    interpret,
    metric_name,
    parse_sizes,
    record_bandwidth,
)
from stages.compat.collectives import CollectiveResult, CollectivesRun, run_collectives
from stages.device import DeviceInfo
from tests.conftest import REPO
from tests.support.builders import env, report

MIB = 1 << 20


def test_bus_factors_are_nccl_tests() -> None:
    # doc/PERFORMANCE.md of nccl-tests: 2(n-1)/n for AllReduce, (n-1)/n for AllGather and ReduceScatter
    for n in (2, 4, 8):
        assert bus_factor("all_reduce", n) == pytest.approx(2 * (n - 1) / n)
        assert bus_factor("all_gather", n) == pytest.approx((n - 1) / n)
        assert bus_factor("reduce_scatter", n) == pytest.approx((n - 1) / n)
    with pytest.raises(ValueError, match="broadcast"):
        bus_factor("broadcast", 2)


def test_metric_names_carry_the_point_with_sorted_keys() -> None:
    assert metric_name("all_reduce", 64) == "collective_busbw_gbps[op=all_reduce,size_mb=64]"


def test_sizes() -> None:
    assert parse_sizes("auto", gpu=False) == CPU_SIZES_MB == (1, 8, 64)
    assert parse_sizes("auto", gpu=True) == GPU_SIZES_MB
    assert GPU_SIZES_MB[0] == 1
    assert GPU_SIZES_MB[-1] == 256
    assert all(b == 2 * a for a, b in itertools.pairwise(GPU_SIZES_MB))  # geometric
    assert parse_sizes("none", gpu=True) == ()
    assert parse_sizes(" 64,1,8,1 ", gpu=False) == (1, 8, 64)
    for bad in ("0", "1,0.5", "x", "1,,2", "99999"):
        with pytest.raises(InputError) as err:
            parse_sizes(bad, gpu=False)
        assert "--bandwidth-sizes" in err.value.line()


def _bw(rank: int, op: str, size_mb: int, seconds: list[float]) -> dict:
    return {"t": 0, "rank": rank, "event": "bandwidth", "collective": f"bandwidth {op} {size_mb} MiB",
            "op": op, "size_mb": size_mb, "seconds": seconds}  # fmt: skip


def test_busbw_uses_the_slowest_rank_per_iteration() -> None:
    events = [
        [_bw(0, "all_reduce", 64, [0.1, 0.2]), _bw(0, "all_gather", 8, [0.01])],
        [_bw(1, "all_reduce", 64, [0.2, 0.1]), _bw(1, "all_gather", 8, [0.02])],
    ]
    points, problem = interpret(events, 2)
    assert problem == ""
    by = {p.metric: p for p in points}
    ar = by[metric_name("all_reduce", 64)]
    assert ar.seconds == pytest.approx(0.2)  # both iterations: the slowest rank took 0.2 s
    assert ar.algbw_gbps == pytest.approx(64 * MIB / 0.2 / 1e9)
    assert ar.busbw_gbps == pytest.approx(ar.algbw_gbps * 1.0)  # 2(n-1)/n = 1 on 2 ranks
    assert ar.samples == pytest.approx((64 * MIB / 0.2 / 1e9,) * 2)
    ag = by[metric_name("all_gather", 8)]
    assert ag.busbw_gbps == pytest.approx(8 * MIB / 0.02 / 1e9 / 2)


def test_a_point_one_rank_never_reported_is_left_out_and_an_error_is_the_problem() -> None:
    events = [
        [_bw(0, "all_reduce", 1, [0.01]), _bw(0, "all_reduce", 8, [0.02])],
        [
            _bw(1, "all_reduce", 1, [0.01]),
            {"t": 0, "rank": 1, "event": "watchdog", "collective": "bandwidth all_reduce 8 MiB", "message": "late"},
        ],
    ]
    points, problem = interpret(events, 2)
    assert [p.metric for p in points] == [metric_name("all_reduce", 1)]
    assert problem == "rank 1: bandwidth all_reduce 8 MiB: late"


def _run(points=(), problem="", statuses=("passed",)) -> CollectivesRun:
    results = tuple(CollectiveResult(f"c{i}", s) for i, s in enumerate(statuses))
    return CollectivesRun("gloo", 2, results, 1.0, 0, ("rank 0: exit 0",), (), tuple(points), problem)


def test_unmeasured_points_are_none_metrics_and_a_failed_check() -> None:
    rec = Recorder("compatibility_check")
    record_bandwidth(rec, _run(problem="rank 1: bandwidth all_reduce 8 MiB: late"), (1, 8))
    assert len([m for m in rec.metrics if m.startswith("collective_busbw_gbps[")]) == 6
    assert all(m.value is None for m in rec.metrics.values())
    (check,) = rec.checks
    assert check.status == "failed"
    assert "late" in check.message


def test_a_broken_collective_check_skips_the_bandwidth_with_the_reason() -> None:
    rec = Recorder("compatibility_check")
    record_bandwidth(rec, _run(statuses=("passed", "failed")), (1,))
    assert rec.checks[0].status == "skipped"
    assert "not run" in rec.checks[0].message
    rec = Recorder("compatibility_check")
    record_bandwidth(rec, _run(), ())
    assert rec.checks[0].status == "skipped"
    assert rec.checks[0].message == "--bandwidth-sizes none"
    assert not rec.metrics
    rec = Recorder("compatibility_check")
    record_bandwidth(rec, _run(), (), skip_reason="no NCCL/RCCL bandwidth to measure: 1 GPU(s) < world size 2")
    assert rec.checks[0].status == "skipped"
    assert "1 GPU(s)" in rec.checks[0].message


@pytest.mark.slow
def test_gloo_ranks_measure_every_op_and_size(tmp_path: Path) -> None:
    run = run_collectives(
        world_size=2, backend="gloo", max_mb=0.01, timeout=30, workdir=tmp_path, bandwidth_mb=(1, 2), bandwidth_iters=3
    )
    assert {r.status for r in run.results} == {"passed"}
    assert run.bandwidth_problem == ""
    assert run.processes_left == 0
    assert {(p.op, p.size_mb) for p in run.bandwidth} == {(op, s) for op in BANDWIDTH_OPS for s in (1, 2)}
    for p in run.bandwidth:
        assert p.busbw_gbps > 0
        assert len(p.samples) == 3
    rec = Recorder("compatibility_check")
    record_bandwidth(rec, run, (1, 2))
    assert rec.checks[0].status == "passed", rec.checks[0].message
    assert rec.metrics[metric_name("all_reduce", 2)].value > 0
    assert rec.metrics[metric_name("all_reduce", 2)].unit == "GB/s"


def _gate() -> dict:
    doc = yaml.safe_load((REPO / "gates.yaml").read_text())
    return doc["gates"]["collective-bandwidth"]


@pytest.mark.parametrize(("now", "outcome"), [(1.0, Outcome.PASS), (0.8, Outcome.WARN), (0.5, Outcome.FAIL)])
def test_the_bandwidth_gate_compares_with_the_baseline(now: float, outcome: Outcome) -> None:
    name = metric_name("all_reduce", 64)
    gates = parse_gates({"version": 1, "gates": {"collective-bandwidth": _gate()}})

    def rep(value: float):
        return report("compatibility_check", {name: (value, "GB/s", "higher")})

    inputs = Inputs(
        gates=gates,
        reports={"compatibility_check": rep(now * 40.0)},
        baselines={"compatibility_check": rep(40.0)},
        channel="stable",
        today=dt.date(2026, 12, 3),
    )
    (gate,) = evaluate(inputs).gates
    assert gate.outcome == outcome, gate.reason


def test_the_bandwidth_gate_is_not_judged_on_cpu() -> None:
    gates = parse_gates({"version": 1, "gates": {"collective-bandwidth": _gate()}})
    cpu = report("compatibility_check", {}, environment=env(device_kind="cpu"))
    (gate,) = evaluate(Inputs(gates=gates, reports={"compatibility_check": cpu}, channel="stable",
                              today=dt.date(2026, 12, 3))).gates  # fmt: skip
    assert gate.outcome == Outcome.SKIPPED


def _stage_ctx(tmp_path: Path, device: DeviceInfo, sizes: str = "auto") -> StageContext:
    opts = compatibility_check.Options(bandwidth_sizes=sizes)
    common = CommonOptions(out=tmp_path)
    return StageContext("compatibility_check", common, opts, device, env(), Recorder("compatibility_check"))


def test_gpu_runner_with_gloo_fallback_skips_the_bandwidth(tmp_path: Path, monkeypatch) -> None:
    seen = {}

    def fake_run(**kw):
        seen.update(kw)
        return _run()

    monkeypatch.setattr(compatibility_check, "run_collectives", fake_run)
    one_gpu = DeviceInfo("cuda", "cuda:0", "H100", count=1)
    ctx = _stage_ctx(tmp_path, one_gpu)
    compatibility_check.check_collectives(ctx, "")
    assert seen["backend"] == "gloo"
    assert seen["bandwidth_mb"] == ()  # not even timed
    check = next(c for c in ctx.rec.checks if c.name == "collectives.bandwidth")
    assert check.status == "skipped"
    assert "no NCCL/RCCL bandwidth to measure: 1 GPU(s) < world size 2" in check.message

    two_gpus = DeviceInfo("cuda", "cuda:0", "H100", count=2)
    compatibility_check.check_collectives(_stage_ctx(tmp_path, two_gpus), "")
    assert seen["backend"] == "nccl"
    assert seen["bandwidth_mb"] == GPU_SIZES_MB
    compatibility_check.check_collectives(_stage_ctx(tmp_path, DeviceInfo("cpu", "cpu")), "")
    assert seen["bandwidth_mb"] == CPU_SIZES_MB
