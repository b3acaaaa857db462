"""Tests that fail if a check is weakened (issue 12): a planted wrong smoke kernel, a tiny but significant
slowdown at the edge of min_effect, and the default gates' strictness."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gatekeeper.contract.verdict import Outcome
from gatekeeper.evaluate.gates import default_gates_path, load_gates
from stages import verify_hip
from tests.evaluate.test_evaluate_judge import perf, runs, verdict


def _perturbed(fn):
    def wrong(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out * 1.001 if out.dtype == torch.float32 else out  # 1e-3 off: far above the tolerances

    return wrong


@pytest.mark.parametrize(
    ("kind", "owner", "name"),
    [
        ("matmul", torch.Tensor, "__matmul__"),
        ("conv2d", torch.nn.functional, "conv2d"),
        ("reduction", torch.Tensor, "sum"),
    ],
)
def test_a_planted_wrong_kernel_fails_its_smoke_check(monkeypatch, kind, owner, name):
    monkeypatch.setattr(owner, name, _perturbed(getattr(owner, name)))
    with pytest.raises(AssertionError, match=rf"{kind}: max relative error .* > .* on cpu \(vs CPU float64\)"):
        verify_hip.smoke_kernel(kind, "cpu", verify_hip.SMOKE[kind])


def test_the_unperturbed_kernels_pass():
    for kind, rtol in verify_hip.SMOKE.items():
        assert verify_hip.smoke_kernel(kind, "cpu", rtol)["details"]["max_rel_error"] <= rtol


def test_smoke_tolerances_stay_tight():
    assert max(verify_hip.SMOKE.values()) <= 1e-4


def test_a_tiny_but_significant_slowdown_over_min_effect_fails():
    # 10 quiet processes per side: +4.5% is outside the 3% rule and clearly significant
    got = verdict(perf(runs(1, process_noise=0.002)), perf(runs(2, shift=1.045, process_noise=0.002)))
    assert got["latency-median"].comparison["verdict"] == "regression"
    assert got["latency-median"].outcome is Outcome.WARN  # within the +10% warn rule
    got = verdict(perf(runs(1, process_noise=0.002)), perf(runs(2, shift=1.12, process_noise=0.002)))
    assert got["latency-median"].outcome is Outcome.FAIL


def test_a_slowdown_under_min_effect_is_not_a_regression():
    got = verdict(perf(runs(1, process_noise=0.002)), perf(runs(2, shift=1.01, process_noise=0.002)))
    assert got["latency-median"].comparison["verdict"] != "regression"
    assert got["latency-median"].outcome is Outcome.PASS


def test_default_gates_keep_their_strictness():
    gates = {g.name: g for g in load_gates(default_gates_path(cwd=Path("/nonexistent"))).gates}
    expect = {
        "device-checks": "== 0",
        "operator-coverage": ">= 0.95",
        "precision": "<= 1%",
        "latency-median": "<= +3%",
        "p99-latency": "<= +20%",
        "collectives": ">= 1.0",
        "multi-device": "== 0",
        "environment-hygiene": "== 0",
    }
    assert {name: gates[name].pass_rule.text for name in expect} == expect
    blocking = {n for n, g in gates.items() if g.severity == "blocking" and g.mode == "enforce"}
    assert {"device-checks", "operator-coverage", "precision", "latency-median", "collectives"} <= blocking
    assert gates["device-checks"].on_missing == "fail"
    assert gates["collectives"].max_skipped == 1
