"""Training convergence parity and stability: loss curves compared seed by seed with a golden, a
planted optimizer perturbation (learning rate x1.5) failing the shipped convergence-parity gate, the
spread's variance-ratio test, and repeated loops counting a planted out-of-memory and a planted hang
by kind, with the kinds held to the failure analyzer's categories."""

from __future__ import annotations

import datetime as dt
import io
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from gatekeeper.contract.verdict import Outcome
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import load_gates
from stages import functional_test as ft
from stages._stage import Recorder
from stages.device import DeviceInfo
from stages.functional import convergence, stability, training
from stages.functional.steps import Plan
from stages.isolate import IsolatedOutcome
from tests.support.builders import report

REPO = Path(__file__).resolve().parents[2]
CATALOGUES = sorted((REPO / "tests" / "analyze" / "catalogues").glob("*.yaml"))
TODAY = dt.date(2026, 12, 3)


def _plan(**kw: Any) -> Plan:
    base: dict[str, Any] = {
        "device": DeviceInfo("cpu", "cpu", why_cpu="test"),
        "categories": (),
        "dtypes": (),
        "seeds": (0,),
        "timeout": 120.0,
        "model": None,
        "batch_size": 4,
        "input_shape": None,
        "seed": 0,
    }
    return Plan(**(base | kw))


def _gate(rec: Recorder, name: str) -> Outcome:
    gates = load_gates(REPO / "gates.yaml")  # the shipped rules
    verdict = evaluate(
        Inputs(
            gates=gates,
            reports={"functional_test": report("functional_test", rec.metrics)},
            channel="stable",
            today=TODAY,
        )
    )
    return next(g.outcome for g in verdict.gates if g.name == name)


def _golden(curves: dict[int, list[float]], **config: Any) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "stack": {"torch": "2.13.0", "device_name": "reference"},
        "config": config,
        "curves": {str(s): c for s, c in curves.items()},
    }


def test_curve_distance_and_final_loss() -> None:
    assert convergence.curve_distance([1.0, 0.5], [1.0, 0.5]) == 0.0
    assert convergence.curve_distance([1.0, 0.5], [1.0]) == 1.0  # not comparable: fails closed
    assert convergence.curve_distance([1.1, 0.55], [1.0, 0.5]) == pytest.approx(0.1)
    assert convergence.final_loss([9.0] * 10 + [1.0] * 10) == pytest.approx(1.0)
    assert convergence.final_loss([3.0]) == 3.0


# 20 standard-normal quantiles: seeds' final losses scattered like a normal sample, without chance
Z = [statistics.NormalDist().inv_cdf((i + 0.5) / 20) for i in range(20)]


def test_spread_widening_like_the_field_report_is_significant() -> None:
    stable = [50 + 0.5 * z for z in Z]  # the field report: accuracy +-0.5 on stable ...
    nightly = [50 + 1.2 * z for z in Z]  # ... +-1.2 on nightly
    ratio, p = convergence.spread_test(nightly, stable)
    assert ratio == pytest.approx(2.4)
    assert p < 0.01
    same_ratio, same_p = convergence.spread_test(stable, stable)
    assert same_ratio == 1.0
    assert same_p == pytest.approx(0.5)
    assert convergence.spread_test([1.0], stable) == (None, None)


def test_spread_gate_fails_a_widened_spread() -> None:
    golden = {s: [2.0] * 9 + [50 + 0.5 * z] for s, z in enumerate(Z)}
    wide = {s: [2.0] * 9 + [50 + 1.2 * z] for s, z in enumerate(Z)}
    rec = Recorder("functional_test", io.StringIO())
    convergence.record(rec, wide, [], _golden(golden), steps=10)
    assert rec.metrics["convergence_spread_p"].value < 0.01
    assert _gate(rec, "convergence-spread") is Outcome.FAIL
    assert {c.name: c.status for c in rec.checks}["convergence.spread"] == "failed"


@pytest.mark.slow
def test_learning_rate_x15_fails_convergence_parity() -> None:
    import torch

    threads = torch.get_num_threads()  # train_run pins one thread on the CPU: give the rest of the suite its own

    def curves(lr: float) -> dict[int, list[float]]:
        return {
            s: training.train_run(spec=None, seed=s, steps=15, batch_size=4, input_shape=None, device="cpu", lr=lr)[
                "losses"
            ]
            for s in range(3)
        }

    try:
        golden, same, perturbed = curves(1e-3), curves(1e-3), curves(1.5e-3)
    finally:
        torch.set_num_threads(threads)
    rec = Recorder("functional_test", io.StringIO())
    convergence.record(rec, same, [], _golden(golden), steps=15)
    assert rec.metrics["convergence_curve_distance"].value == 0.0  # same seed, same stack: the same curve
    assert _gate(rec, "convergence-parity") is Outcome.PASS
    assert rec.metrics["convergence_final_loss_spread"].value > 0  # 3 seeds: a spread
    rec = Recorder("functional_test", io.StringIO())
    convergence.record(rec, perturbed, [], _golden(golden), steps=15)
    assert rec.metrics["convergence_curve_distance"].value > 0.05
    assert _gate(rec, "convergence-parity") is Outcome.FAIL
    assert {c.name: c.status for c in rec.checks}["convergence.parity"] == "failed"


def test_a_seed_that_did_not_finish_fails_parity_closed() -> None:
    rec = Recorder("functional_test", io.StringIO())
    curve = [1.0, 0.5, 0.25]
    convergence.record(rec, {0: curve}, [1], _golden({0: curve, 1: curve}), steps=3)
    assert rec.metrics["convergence_curve_distance"].value == 1.0
    assert _gate(rec, "convergence-parity") is Outcome.FAIL


def test_golden_curves_are_checked_before_any_training(tmp_path: Path) -> None:
    plan = _plan()
    kw: dict[str, Any] = {"steps": 3, "seeds": 2, "lr": 1e-3, "train_step": None}
    with pytest.raises(InputError, match="no loss curves"):
        convergence.read_golden(tmp_path, plan, **kw)
    config = {"model": "stages.models:demo_model", "batch_size": 4, "input_shape": None, "steps": 3, "lr": 1e-3}
    config["train_step"] = None
    path = tmp_path / convergence.FILE
    path.write_text(json.dumps(_golden({0: [1.0, 0.5, 0.2], 1: [1.0, 0.6, 0.3]}, **config)))
    assert convergence.read_golden(tmp_path, plan, **kw)["curves"]["1"] == [1.0, 0.6, 0.3]
    with pytest.raises(InputError, match=r"config\.lr"):
        convergence.read_golden(tmp_path, plan, **(kw | {"lr": 1.5e-3}))
    with pytest.raises(InputError, match=r"no curve for seed\(s\) \[2\]"):
        convergence.read_golden(tmp_path, plan, **(kw | {"seeds": 3}))
    path.write_text(json.dumps(_golden({0: [1.0, float("nan"), 0.2]}, **config)).replace("NaN", "NaN"))
    with pytest.raises(InputError, match="finite"):
        convergence.read_golden(tmp_path, plan, **kw)
    path.write_text("{not json")
    with pytest.raises(InputError, match="not a readable"):
        convergence.read_golden(tmp_path, plan, **kw)
    # the golden comes from another job's artifacts: read as a regular file, bounded, strict
    path.write_text(json.dumps(_golden({0: [1.0], 1: [1.0]}, **config)).replace('"steps": 3', '"steps": 3, "steps": 3'))
    with pytest.raises(InputError, match="not a readable convergence golden: duplicate key 'steps'"):
        convergence.read_golden(tmp_path, plan, **kw)
    path.unlink()
    path.symlink_to("/dev/zero")  # stat says 0 bytes; read, it never ends
    with pytest.raises(InputError, match="not a readable convergence golden: expected a convergence golden, found a"):
        convergence.read_golden(tmp_path, plan, **kw)


def test_bad_training_options_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base = ["--out", str(tmp_path), "--device", "cpu", "--categories", "none", "--no-traced", "--no-sparse"]
    assert ft.main([*base, "--train-steps", "-1"]) == 2
    assert "--train-steps" in capsys.readouterr().err
    assert ft.main([*base, "--train-lr", "0"]) == 2
    assert "--train-lr" in capsys.readouterr().err
    assert ft.main([*base, "--train-step", "no.such.module:step"]) == 2
    assert "--train-step" in capsys.readouterr().err


# ---------------------------------------------------------------- stability


def _catalogue_messages() -> list[dict[str, Any]]:
    return [m for p in CATALOGUES for m in yaml.safe_load(p.read_text(encoding="utf-8"))["messages"]]


def test_interruption_kinds_agree_with_the_failure_analyzer_on_real_runtime_messages() -> None:
    matched: dict[str, int] = {}
    for msg in _catalogue_messages():
        kind = stability.classify_text(msg["rendered"])
        if kind is None:
            continue
        matched[kind] = matched.get(kind, 0) + 1
        assert msg["category"] in stability.KIND_CATEGORIES[kind], (kind, msg["rendered"][:120])
    assert set(matched) == {"oom", "launch_timeout", "illegal_address"}, matched


def test_classify_outcomes() -> None:
    assert stability.classify(IsolatedOutcome("ok", {})) is None
    assert stability.classify(IsolatedOutcome("timeout", message="timed out after 3 s")) == "hang"
    assert stability.classify(IsolatedOutcome("crashed", message="worker killed by signal SIGSEGV")) == "crash"
    oom = IsolatedOutcome(
        "raised", None, "OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB", "OutOfMemoryError"
    )
    assert stability.classify(oom) == "oom"
    assert stability.classify(IsolatedOutcome("raised", None, "ValueError: shapes", "ValueError")) == "other"


def test_memory_growth_per_epoch_after_the_first() -> None:
    leak = [[100.0, 150.0, 152.0, 154.0, 156.0], [90.0, 140.0, 142.0, 144.0, 146.0]]
    slope, lo, hi = stability.memory_growth(leak)
    assert slope == pytest.approx(2.0)  # the first epoch's 50 MB of optimizer state is not growth
    assert lo <= slope <= hi
    assert stability.memory_growth([[1.0, 2.0]]) is None


@pytest.mark.slow
def test_a_planted_oom_and_a_planted_hang_are_counted_by_kind() -> None:
    from gatekeeper.analyze.classify import Classifier
    from gatekeeper.analyze.diagnosis import diagnose
    from gatekeeper.analyze.rules import load_rules

    rec = Recorder("functional_test", io.StringIO())
    summary = stability.run(
        rec,
        _plan(batch_size=2),
        loops=3,
        epochs=4,  # the finished loop's epochs 2-4: three points for the memory slope
        steps=2,
        lr=1e-3,
        train_step=None,
        timeout=30.0,
        target="tests.support.faulty_training:train_run",
    )
    m = rec.metrics
    assert m["train_interruptions"].value == 2
    assert m["train_interruptions[kind=oom]"].value == 1
    assert m["train_interruptions[kind=hang]"].value == 1
    assert sum(m[f"train_interruptions[kind={k}]"].value for k in stability.KINDS) == 2
    checks = {c.name: c for c in rec.checks}
    assert checks["stability.loop.1"].status == "failed"
    assert checks["stability.loop.1"].message.startswith("interrupted (oom): RuntimeError")
    assert (
        checks["stability.loop.2"].message == "interrupted (hang): check timed out after 30 s (the worker was killed)"
    )
    assert checks["stability.loop.3"].status == "passed"
    assert summary["interruptions"]["oom"] == 1
    assert "memory_growth_mb_per_epoch" in m  # from the loop that finished
    assert _gate(rec, "train-interruptions") is Outcome.FAIL
    # what the stage logged, the failure analyzer files under the same categories
    rules = load_rules()
    for name, kind in (("stability.loop.1", "oom"), ("stability.loop.2", "hang")):
        clf = Classifier(rules)
        line = f"  [FAIL] {name}: {checks[name].message}"  # as the stage log shows it
        clf.scan(io.BytesIO(line.encode()), "functional_test.log")
        assert diagnose(clf.evidence, rules).category in stability.KIND_CATEGORIES[kind]


@pytest.mark.slow
def test_stage_convergence_and_stability_on_cpu(tmp_path: Path) -> None:
    from gatekeeper.contract.stage_report import read_stage

    base = ["--device", "cpu", "--categories", "none", "--no-traced", "--no-sparse", "--checkpoint-trials", "0"]
    train = ["--batch-size", "2", "--train-steps", "4", "--train-seeds", "2"]
    golden = tmp_path / "golden"
    assert ft.main([*base, *train, "--out", str(tmp_path / "a"), "--golden-save", str(golden)]) == 0
    assert (golden / convergence.FILE).is_file()
    argv = [*base, *train, "--out", str(tmp_path / "b"), "--golden", str(golden), "--stability-loops", "1"]
    assert ft.main(argv) == 0
    r = read_stage(tmp_path / "b" / "functional_test.json")
    assert r.metrics["convergence_curve_distance"].value == 0.0  # same stack, same seeds
    assert len(r.metrics["convergence_final_loss"].flat_samples) == 2
    assert r.metrics["convergence_spread_p"].value == pytest.approx(0.5)
    assert r.metrics["train_interruptions"].value == 0
    statuses = {c.name: c.status for c in r.checks}
    assert statuses["convergence.parity"] == "passed"
    assert statuses["stability.loop.1"] == "passed"
    assert statistics.fmean(r.summary["convergence"]["final_losses"]) > 0
