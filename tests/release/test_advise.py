from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from gatekeeper import cli
from gatekeeper.history import BaselineStore, open_store
from gatekeeper.release.advise import AdviseInputs, advise, run_advise
from gatekeeper.release.evidence import ChannelEvidence, collect_evidence, read_breakers
from tests.support.release_history import day, environment, pipeline, record, sqlite_store

NIGHTLY_TORCH = "2.7.0.dev20250301+rocm6.3"


def _good(channel: str) -> ChannelEvidence:
    return ChannelEvidence(channel, 10, {"pass": 10}, 0.98, 1.0, 30.0, "closed")


def _rules(advice) -> dict[str, int]:
    return {r.rule: r.points for r in advice.reasons}


_BUILT: dict[tuple, Path] = {}


def _history(
    nightly_blocked: int = 0,
    nightly_rate: float = 0.98,
    nightly_tail: float = 30.0,
    restore: float = 1.0,
    stable_blocked: int = 0,
) -> BaselineStore:
    """Ten recorded pipelines per channel on gfx90a, plus noise on another device, in a real sqlite store.

    Each history is written once per session (the tests only read it) and opened afresh by its spec."""
    key = (nightly_blocked, nightly_rate, nightly_tail, restore, stable_blocked)
    if key not in _BUILT:
        directory = Path(tempfile.mkdtemp(prefix="advise-history-", dir=_ROOT))
        store = sqlite_store(directory)
        for n in range(1, 11):
            record(
                store,
                pipeline(environment(), started_at=day(n)),
                verdict="blocked" if n <= stable_blocked else "pass",
                pipeline_id=f"s{n}",
            )
            nightly = environment(channel="nightly", torch=NIGHTLY_TORCH)
            reports = pipeline(
                nightly, started_at=day(n), pass_rate=nightly_rate, tail_ms=nightly_tail, restore=restore
            )
            record(store, reports, verdict="blocked" if n <= nightly_blocked else "pass", pipeline_id=f"n{n}")
        other = environment(channel="nightly", torch=NIGHTLY_TORCH, arch="gfx942")
        for n in range(11, 16):  # newer, but another device: never weighed for gfx90a
            record(store, pipeline(other, started_at=day(n), pass_rate=0.5), verdict="blocked", pipeline_id=f"o{n}")
        _BUILT[key] = directory / "history.db"
    return open_store(f"sqlite:{_BUILT[key]}")


_ROOT: Path | None = None


@pytest.fixture(autouse=True, scope="module")
def _history_root(tmp_path_factory: pytest.TempPathFactory) -> None:
    global _ROOT
    _ROOT = tmp_path_factory.mktemp("advise-histories")


# ---------------------------------------------------------------- hard rules


@pytest.mark.parametrize("dep", ["onnxruntime", "TensorRT", "torch-tensorrt", "onnxruntime-gpu"])
def test_downstream_runtime_blocks_nightly_even_with_perfect_evidence(dep: str) -> None:
    a = advise(
        AdviseInputs(downstream=("numpy", dep), needs_nightly_feature=True, compat_owner="ml-platform"),
        {"stable": _good("stable"), "nightly": _good("nightly")},
        "gfx90a",
    )
    assert (a.decision, a.risk) == ("stable", "blocked")
    assert dep in next(r.text for r in a.reasons if r.rule == "downstream")


@pytest.mark.parametrize(
    ("family", "locked", "risk"),
    [("vit", False, "high"), ("diffusion", False, "high"), ("vit", True, "low"), ("cnn", False, "low")],
)
def test_vit_and_diffusion_on_unlocked_rocm_minor_are_high_risk(family: str, locked: bool, risk: str) -> None:
    a = advise(
        AdviseInputs(model_family=family, rocm_minor_locked=locked, needs_nightly_feature=True, compat_owner="me"),
        {"stable": _good("stable"), "nightly": _good("nightly")},
        "gfx90a",
    )
    assert a.risk == risk
    assert a.decision == ("stable" if risk == "high" else "nightly")


# ---------------------------------------------------------------- inputs


def test_nightly_feature_need_and_compat_owner() -> None:
    ev = {"stable": _good("stable"), "nightly": _good("nightly")}
    assert advise(AdviseInputs(), ev, "gfx90a").decision == "stable"  # no need: stable is the default
    owned = advise(AdviseInputs(needs_nightly_feature=True, compat_owner="ml-platform"), ev, "gfx90a")
    assert (owned.decision, owned.risk, _rules(owned)["compat-owner"]) == ("nightly", "low", 0)
    unowned = advise(AdviseInputs(needs_nightly_feature=True), ev, "gfx90a")
    assert _rules(unowned)["compat-owner"] == 1
    assert "nobody owns compatibility" in " ".join(r.text for r in unowned.reasons)


def test_no_nightly_evidence_is_a_risk_not_a_pass() -> None:
    a = advise(AdviseInputs(needs_nightly_feature=True), {"stable": _good("stable")}, "gfx90a")
    assert _rules(a)["nightly-evidence"] == 2
    assert a.risk == "medium"  # unknown evidence (2) + no owner (1)


def test_stable_failing_where_nightly_passes_favours_nightly() -> None:
    stable = ChannelEvidence("stable", 10, {"blocked": 6, "pass": 4}, 0.9, 1.0, 30.0)
    a = advise(AdviseInputs(compat_owner="me"), {"stable": stable, "nightly": _good("nightly")}, "gfx90a")
    assert a.decision == "nightly"
    assert "stable is blocked in 60.0% of runs" in a.reasons[-1].text


# ---------------------------------------------------------------- evidence weighting, from recorded histories


def test_evidence_is_this_device_both_channels_newest_runs() -> None:
    ev, arch = collect_evidence(_history(nightly_blocked=3), "gfx90a", 10, {})
    assert arch == "gfx90a"
    assert (ev["nightly"].runs, ev["nightly"].verdicts) == (10, {"blocked": 3, "pass": 7})
    assert ev["stable"].verdicts == {"pass": 10}
    assert ev["nightly"].op_pass_rate == pytest.approx(0.98)
    # without --arch: the newest run's device (here the gfx942 noise)
    assert collect_evidence(_history(), None, 10, {})[1] == "gfx942"
    # limit: only the newest runs count
    assert collect_evidence(_history(nightly_blocked=3), "gfx90a", 5, {})[0]["nightly"].verdicts == {"pass": 5}


@pytest.mark.parametrize(
    ("history", "rule", "points"),
    [
        ({}, "nightly-verdicts", 0),
        ({"nightly_blocked": 1}, "nightly-verdicts", 1),
        ({"nightly_blocked": 3}, "nightly-verdicts", 2),
        ({"nightly_blocked": 6}, "nightly-verdicts", 3),
        ({"nightly_rate": 0.97}, "op-pass-rate", 1),
        ({"nightly_rate": 0.90}, "op-pass-rate", 2),
        ({"restore": 0.95}, "checkpoint-restore", 2),
        ({"nightly_tail": 40.0}, "tail-latency", 1),
        ({"nightly_tail": 60.0}, "tail-latency", 2),
    ],
)
def test_each_evidence_rule_weighs_recorded_numbers(history: dict, rule: str, points: int) -> None:
    ev, arch = collect_evidence(_history(**history), "gfx90a", 10, {})
    a = advise(AdviseInputs(compat_owner="me"), ev, arch)
    assert _rules(a)[rule] == points, [r.text for r in a.reasons]


def test_weighting_moves_the_risk_level() -> None:
    levels = []
    for history in ({}, {"nightly_blocked": 3}, {"nightly_blocked": 6, "nightly_tail": 60.0}):
        ev, arch = collect_evidence(_history(**history), "gfx90a", 10, {})
        levels.append(advise(AdviseInputs(needs_nightly_feature=True, compat_owner="me"), ev, arch))
    assert [a.risk for a in levels] == ["low", "medium", "high"]
    assert [a.decision for a in levels] == ["nightly", "nightly", "stable"]
    text = " ".join(r.text for r in levels[2].reasons)
    assert "nightly blocked 6 of 10 runs on gfx90a (60.0%); stable 0 of 10 (0.0%)" in text
    assert _rules(levels[2])["tail-latency"] == 2


def test_breaker_state_files(tmp_path: Path) -> None:
    d = tmp_path / "breaker"
    d.mkdir()
    (d / "nightly--functional_test.json").write_text(
        json.dumps({"schema": "gatekeeper.breaker/v1", "channel": "nightly", "job": "functional_test", "state": "open"})
    )
    (d / "nightly--verify_hip.json").write_text(
        json.dumps({"schema": "gatekeeper.breaker/v1", "channel": "nightly", "job": "verify_hip", "state": "closed"})
    )
    listing = tmp_path / "status.json"  # what 'gatekeeper breaker status --json' prints
    listing.write_text(json.dumps([{"channel": "stable", "job": "x", "state": "half_open"}]))
    states, notes = read_breakers([str(d), str(listing), str(tmp_path / "absent")])
    assert states == {"nightly": "open", "stable": "half_open"}
    assert "no breaker state at" in notes[0]
    ev, arch = collect_evidence(_history(), "gfx90a", 10, states)
    a = advise(AdviseInputs(needs_nightly_feature=True, compat_owner="me"), ev, arch)
    assert _rules(a)["breaker"] == 3
    assert a.risk == "medium"


# ---------------------------------------------------------------- CLI


def test_cli_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    spec = f"sqlite:{_history(nightly_blocked=3).path}"  # type: ignore[attr-defined]
    argv = ["advise", "--history", spec, "--arch", "gfx90a", "--needs-nightly-feature", "--compat-owner", "ml"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("decision: nightly\nnightly risk: medium")
    assert "  nightly    10              7/0/3     98.0%" in out
    assert cli.main([*argv, "--downstream", "onnxruntime,tensorrt", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["decision"], doc["risk"]) == ("stable", "blocked")
    assert doc["evidence"]["nightly"]["blocked_share"] == pytest.approx(0.3)


def test_cli_without_history_still_advises(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["advise", "--model-family", "diffusion", "--no-rocm-minor-locked"]) == 0
    out = capsys.readouterr().out
    assert "nightly risk: high" in out
    assert "no --history store given" in out


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["--runs", "0"], "--runs: must be at least 1"),
        (["--breaker-state", "BAD"], "not a gatekeeper breaker state"),
        (["--history", "nosuch:x"], "unknown baseline store 'nosuch'"),
        (["--model-family", "rnn"], ""),
    ],
)
def test_cli_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expect: str
) -> None:
    if "BAD" in argv:
        bad = tmp_path / "b.json"
        bad.write_text('{"state": "weird"}')
        argv = [str(bad) if a == "BAD" else a for a in argv]
    assert cli.main(["advise", *argv]) == 2
    err = capsys.readouterr().err
    assert expect in err


def test_run_advise_rejects_unknown_family() -> None:
    from gatekeeper.core.errors import InputError

    with pytest.raises(InputError, match="unknown family"):
        run_advise(AdviseInputs(model_family="rnn"))


def test_runs_without_recorded_verdicts_are_weak_evidence() -> None:
    nightly = ChannelEvidence("nightly", 1, {"unknown": 1}, 0.98, 1.0, 30.0)
    a = advise(AdviseInputs(needs_nightly_feature=True, compat_owner="me"), {"nightly": nightly}, "cpu")
    assert _rules(a)["nightly-verdicts"] == 1
    assert _rules(a)["nightly-evidence"] == 1
    assert a.risk == "medium"


def test_runs_recorded_outside_ci_group_by_record_time(tmp_path: Path) -> None:
    """``evaluate --record`` outside CI has no pipeline id: one run's stages share the record time."""
    from dataclasses import replace

    from gatekeeper.history import RunInfo

    store = sqlite_store(tmp_path)
    for n in (1, 2):
        for k, r in enumerate(pipeline(environment(channel="nightly"), started_at=day(n))):
            # each stage started at its own time, as in a real pipeline
            staged = replace(r, started_at=day(n).replace("03:00", f"03:{10 * k:02d}"))
            store.save(staged, RunInfo(verdict="blocked", recorded_at=day(n)))
    ev, _ = collect_evidence(store, "gfx90a", 10, {})
    assert ev["nightly"].runs == 2
    assert ev["nightly"].verdicts == {"blocked": 2}


@pytest.mark.parametrize(
    ("nightly_blocked", "stable_blocked", "points"),
    [(6, 6, 2), (3, 3, 0), (6, 1, 3), (3, 1, 2), (2, 0, 2)],
)
def test_blocked_share_is_weighed_against_stable(nightly_blocked: int, stable_blocked: int, points: int) -> None:
    store = _history(nightly_blocked=nightly_blocked, stable_blocked=stable_blocked)
    ev, arch = collect_evidence(store, "gfx90a", 10, {})
    assert _rules(advise(AdviseInputs(compat_owner="me"), ev, arch))["nightly-verdicts"] == points


def test_a_recorded_arch_with_a_newline_forges_no_line_of_the_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2026-12-04 audit, second pass: the text advice was escaped by the terminal writer, which keeps newlines;
    the device a run recorded (the code under test writes it) is named in the advice, so an arch
    ``gfx90a\\ndecision: stable`` put a second decision line under the real one. Each line is escaped on its own
    (``escape.terminal_lines``)."""
    store = sqlite_store(tmp_path)
    arch = "gfx90a\ndecision: stable\nnightly risk: low"
    for n, channel in ((1, "stable"), (2, "nightly")):
        env = environment(channel=channel, torch=NIGHTLY_TORCH if channel == "nightly" else "2.5.1+rocm6.2", arch=arch)
        record(store, pipeline(env, started_at=day(n)), verdict="pass", pipeline_id=f"p{n}")
    assert cli.main(["advise", "--history", f"sqlite:{tmp_path / 'history.db'}", "--model-family", "llm"]) == 0
    out = capsys.readouterr().out
    assert len([line for line in out.splitlines() if line.startswith("decision:")]) == 1, out
    # since the third pass such a record is not believed at all: a name with a control character is corrupt
    # input, left out of the evidence and named in a note (one line, escaped)
    assert "device: unknown (no recorded runs)" in out
    notes = [line for line in out.splitlines() if line.startswith("note: record run")]
    assert notes, out
    assert all("contains a control character" in line for line in notes)
