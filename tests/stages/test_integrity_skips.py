"""Skips only where they are true (issue 12): a collective is skipped as unsupported only for a listed
(backend, op, dtype); a gate can bound its skips."""

from __future__ import annotations

import datetime as dt

import pytest

from gatekeeper.contract.stage_report import Check
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import parse_gates
from stages.compat import collectives, rank
from tests.stages.test_compat_collectives import _done, _ev, _exit
from tests.support.builders import report


def _with_skip(coll: str, message: str, ranks=(0, 1)) -> list[list[dict]]:
    events = [_done(0, 5), _done(1, 5)]
    for r in ranks:
        idx = next(i for i, e in enumerate(events[r]) if e["event"] == "pass" and e["collective"] == coll)
        events[r][idx] = _ev(r, "skip", coll, message=message)
    return events


@pytest.mark.parametrize(
    "text",
    [
        "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO), NCCL version 2.21.5: not supported",
        "RCCL: operation not implemented on this device",
        "unsupported",
    ],
)
def test_an_nccl_error_saying_unsupported_is_a_failure(text):
    assert not rank.may_skip("nccl", "all_reduce", "float32", RuntimeError(text))
    by = {r.name: r for r in collectives._interpret(_with_skip("all_reduce", text), [_exit(0), _exit(0)], 5, "nccl")}
    assert by["all_reduce"].status == "failed"
    assert "not a known unsupported combination" in by["all_reduce"].message


def test_only_the_listed_combination_is_skipped():
    err = RuntimeError("ProcessGroupGloo does not support reduce_scatter")
    assert ("gloo", "reduce_scatter", "float32") in rank.UNSUPPORTED
    assert rank.may_skip("gloo", "reduce_scatter", "float32", err)
    assert not rank.may_skip("gloo", "all_reduce", "float32", RuntimeError("all_reduce not supported"))
    assert not rank.may_skip("gloo", "reduce_scatter", "float32", RuntimeError("connection reset by peer"))
    events = _with_skip("reduce_scatter", "gloo: RuntimeError: ProcessGroupGloo does not support reduce_scatter")
    by = {r.name: r for r in collectives._interpret(events, [_exit(0), _exit(0)], 5, "gloo")}
    assert by["reduce_scatter"].status == "skipped"


def test_ranks_that_disagree_are_a_failure_not_a_pass():
    events = _with_skip("reduce_scatter", "gloo: ProcessGroupGloo does not support reduce_scatter", ranks=(1,))
    by = {r.name: r for r in collectives._interpret(events, [_exit(0), _exit(0)], 5, "gloo")}
    assert by["reduce_scatter"].status == "failed"


_GATES = {
    "version": 1,
    "gates": {
        "collectives": {
            "metric": "compatibility_check.collectives_pass_rate",
            "pass": ">= 1.0",
            "max_skipped": 1,
            "skip_checks": ["collectives.all_*", "collectives.broadcast", "collectives.reduce_scatter"],
        }
    },
}


def _verdict(skipped: list[str]):
    checks = [Check(f"collectives.{c}", "skipped" if c in skipped else "passed", "x") for c in collectives.COLLECTIVES]
    checks.append(Check("collectives.nccl", "skipped", "one GPU: gloo instead"))  # outside skip_checks
    rep = report("compatibility_check", metrics={"collectives_pass_rate": 1.0}, checks=checks)
    inputs = Inputs(parse_gates(_GATES), {"compatibility_check": rep}, "stable", dt.date(2026, 12, 1))
    return evaluate(inputs).gates[0]


def test_a_gate_bounds_its_skips():
    assert _verdict([]).outcome.value == "pass"
    assert _verdict(["reduce_scatter"]).outcome.value == "pass"
    got = _verdict(["all_reduce", "all_gather", "broadcast", "reduce_scatter"])
    assert got.outcome.value == "fail"
    assert "4 checks skipped (at most 1 allowed: " in got.reason


def test_max_skipped_is_in_the_default_collectives_gate():
    from pathlib import Path

    from gatekeeper.evaluate.gates import default_gates_path, load_gates

    gate = next(g for g in load_gates(default_gates_path(cwd=Path("/nonexistent"))).gates if g.name == "collectives")
    assert gate.max_skipped is not None
