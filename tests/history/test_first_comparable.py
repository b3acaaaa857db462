from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gatekeeper.contract.stage_report import StageReport
from gatekeeper.history.baseline import RunInfo, first_comparable
from tests.support.builders import env, report

LIKE = report("performance_baseline")  # rocm gfx90a, ROCm 6.2.4, stable channel


def _run(run_id: str, *, status: str = "passed", **environment: Any) -> tuple[RunInfo, StageReport]:
    return RunInfo(run_id=run_id), report("performance_baseline", status=status, environment=env(**environment))


def _id(found: tuple[RunInfo, StageReport] | None) -> str | None:
    return found[0].run_id if found else None


def test_the_first_comparable_candidate_and_the_reasons_before_it() -> None:
    candidates = [_run("1", gfx_arch="gfx1100"), _run("2", channel="nightly"), _run("3"), _run("4")]
    found, reasons = first_comparable(candidates, LIKE)
    assert _id(found) == "3"
    assert reasons == [
        "baseline ran on arch gfx1100, this run on gfx90a",
        "baseline ran on channel nightly, this run on stable",
    ]


def test_nothing_comparable_keeps_every_reason_in_order() -> None:
    found, reasons = first_comparable([_run("1", rocm_version="6.3.1"), _run("2", gfx_arch="gfx1100")], LIKE)
    assert found is None
    assert reasons == [
        "baseline ran on ROCm 6.3.1, this run on ROCm 6.2.4",
        "baseline ran on arch gfx1100, this run on gfx90a",
    ]
    assert first_comparable([], LIKE) == (None, [])


def test_reads_no_candidate_after_the_one_found() -> None:
    def lazily() -> Iterator[tuple[RunInfo, StageReport]]:
        yield _run("1")
        pytest.fail("read a candidate after the comparable one")

    found, reasons = first_comparable(lazily(), LIKE)
    assert _id(found) == "1"
    assert reasons == []


def test_passed_only_refuses_a_stage_that_did_not_pass() -> None:
    failed = _run("1", status="failed")
    assert _id(first_comparable([failed], LIKE)[0]) == "1"  # the file store keeps a named directory's result
    candidates = [failed, _run("2", status="failed", channel="nightly"), _run("3")]
    found, reasons = first_comparable(candidates, LIKE, passed_only=True)
    assert _id(found) == "3"
    # a stage that did not pass says so; comparability's reason comes first when both apply
    assert reasons == ["the baseline stage failed", "baseline ran on channel nightly, this run on stable"]


def test_a_baseline_taken_with_other_gpu_settings_is_another_machine() -> None:
    capped = report("performance_baseline", environment=env(extra={"gpu_power_cap_w": 550.0, "gpu_perf_level": "auto"}))
    candidates = [
        _run("1", extra={"gpu_power_cap_w": 750.0, "gpu_perf_level": "auto"}),
        _run("2", extra={"gpu_power_cap_w": 550.0, "gpu_perf_level": "high"}),
        _run("3", extra={"gpu_power_cap_w": 550.0, "gpu_perf_level": "auto"}),
    ]
    found, reasons = first_comparable(candidates, capped)
    assert _id(found) == "3"
    assert reasons == [
        "baseline ran with GPU power cap 750 W, this run with 550 W",
        "baseline ran with GPU performance level high, this run with auto",
    ]
    # a record from before the settings were kept, or a runner whose tool did not say: not known to differ
    assert _id(first_comparable([_run("4")], capped)[0]) == "4"
