"""The nightly trigger (--since-green) and the gatekeeper:bisect job of the CI template, rendered."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.bisect.nightly import STATE_SCHEMA, plan_since_green
from gatekeeper.core.errors import InputError
from tests.support.notify_inputs import write_verdict
from tests.test_ci_templates import ROOT, _include, _runs, render, validate

INDEX = "https://download.pytorch.org/whl/nightly/rocm6.2"


def _night(tmp_path: Path, result: str, *, torch: str, commit: str, name: str) -> Path:
    path = write_verdict(tmp_path, result=result, channel="nightly", context={"commit": commit}, name=name)
    doc = json.loads(path.read_text())
    doc["environment"]["torch_version"] = torch
    path.write_text(json.dumps(doc))
    return path


def test_bisects_only_when_the_nightly_turns_red_after_a_green_night(tmp_path):
    state = tmp_path / "cache" / "nightly.json"
    a, b = "a" * 40, "b" * 40
    green = _night(tmp_path, "pass", torch="2.7.0.dev20250301+rocm6.2", commit=a, name="n1.json")
    plan = plan_since_green(verdict=green, state=state, index_url=INDEX)
    assert plan.provider is None
    assert "no record of the previous night" in plan.reason
    assert json.loads(state.read_text())["schema"] == STATE_SCHEMA
    red = _night(tmp_path, "blocked", torch="2.7.0.dev20250302+rocm6.2", commit=a, name="n2.json")
    plan = plan_since_green(verdict=red, state=state, index_url=INDEX)
    assert (plan.provider, plan.good, plan.bad) == ("pip", "2.7.0.dev20250301+rocm6.2", "2.7.0.dev20250302+rocm6.2")
    assert plan.options == {"package": "torch", "index_url": INDEX, "find_links": None}
    # red again the next night: already bisected
    red2 = _night(tmp_path, "blocked", torch="2.7.0.dev20250303+rocm6.2", commit=a, name="n3.json")
    assert plan_since_green(verdict=red2, state=state, index_url=INDEX).provider is None
    # green, then red with the same torch and a new commit: the commits are bisected
    plan_since_green(
        verdict=_night(tmp_path, "warn", torch="2.7.0.dev20250303", commit=a, name="n4.json"),
        state=state,
        index_url=INDEX,
    )
    plan = plan_since_green(
        verdict=_night(tmp_path, "blocked", torch="2.7.0.dev20250303", commit=b, name="n5.json"),
        state=state,
        index_url=INDEX,
    )
    assert (plan.provider, plan.good, plan.bad) == ("git", a, b)
    # green, then red with nothing changed: nothing to walk
    plan_since_green(
        verdict=_night(tmp_path, "pass", torch="2.7.0.dev20250303", commit=b, name="n6.json"),
        state=state,
        index_url=INDEX,
    )
    plan = plan_since_green(
        verdict=_night(tmp_path, "blocked", torch="2.7.0.dev20250303", commit=b, name="n7.json"),
        state=state,
        index_url=INDEX,
    )
    assert plan.provider is None
    assert "neither torch nor the commit changed" in plan.reason


def test_a_tampered_state_is_not_trusted_and_bad_input_is_refused(tmp_path):
    state = tmp_path / "nightly.json"
    state.write_text(
        json.dumps({"schema": STATE_SCHEMA, "result": "pass", "torch_version": "$(rm -rf /)", "commit": "; reboot"})
    )
    red = _night(tmp_path, "blocked", torch="2.7.0.dev20250302", commit="c" * 40, name="r.json")
    plan = plan_since_green(verdict=red, state=state, index_url=INDEX)
    assert plan.provider is None  # neither value is a version or a commit: nothing is bisected from it
    stable = write_verdict(tmp_path, channel="stable", name="s.json")
    with pytest.raises(InputError, match="watches the nightly channel"):
        plan_since_green(verdict=stable, state=state, index_url=INDEX)
    state.write_text(
        json.dumps({"schema": STATE_SCHEMA, "result": "pass", "torch_version": "2.7.0.dev20250301", "commit": "c" * 40})
    )
    with pytest.raises(InputError, match="no nightly index was given"):
        plan_since_green(verdict=red, state=state, index_url=None)


# ---------------------------------------------------------------- the template job


@pytest.fixture(scope="module")
def job() -> dict[str, Any]:
    return render(_include(), ROOT)["gatekeeper:bisect"]


def test_bisect_job_renders_valid_and_runs_when_it_should(job):
    validate(render(_include(bisect_provider="pip", bisect_metric="latency_ms"), ROOT))
    assert _runs(job, {"CI_PIPELINE_SOURCE": "schedule"})
    assert _runs(job, {"CI_PIPELINE_SOURCE": "push"})  # as a manual job
    manual = next(r for r in job["rules"] if "if" not in r)
    assert manual == {"when": "manual", "allow_failure": True}
    schedule = next(r for r in job["rules"] if r.get("if") == '$CI_PIPELINE_SOURCE == "schedule"')
    assert schedule["when"] == "always"  # after the gate, red or green: it decides itself
    assert not _runs(job, {"CI_COMMIT_TAG": "v1.0.0", "CI_PIPELINE_SOURCE": "push"})
    assert job["needs"] == [{"job": "gatekeeper:gate", "artifacts": True, "optional": True}]
    assert job["variables"]["GIT_DEPTH"] == "0"
    assert "artifacts/bisect/" in job["artifacts"]["paths"]
    assert job["cache"][0]["paths"] == [".gatekeeper-cache/bisect/"]
    assert job["tags"] == ["gpu"]  # the stages run on the GPU runners


def _run_script(job: dict[str, Any], tmp_path: Path, env: dict[str, str]) -> tuple[int, list[list[str]], str]:
    """Run the job's script in bash with a stand-in gatekeeper that records its argv (one JSON list a line)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.jsonl"
    fake = bin_dir / "gatekeeper"
    fake.write_text(f"#!/bin/sh\npython3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' \"$@\" >> {log}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    script = "\n".join(job["script"])
    variables = {k: str(v) for k, v in job["variables"].items()}
    full = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", **variables, **env}
    res = subprocess.run(
        ["bash", "-ec", script], env=full, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return res.returncode, calls, res.stderr


def test_manual_run_bisects_the_given_range(job, tmp_path):
    env = {
        "CI_PIPELINE_SOURCE": "web",
        "GATEKEEPER_BISECT_GOOD": "v1.2",
        "CI_COMMIT_SHA": "f" * 40,
        "GATEKEEPER_MODEL": "pkg.models:build",
        "GATEKEEPER_BISECT_METRIC": "latency_ms",
    }
    code, calls, _ = _run_script(job, tmp_path, env)
    assert code == 0
    (call,) = calls
    assert call[:7] == ["bisect", "--provider", "git", "--good", "v1.2", "--bad", "f" * 40]
    assert call[call.index("--metric") + 1] == "latency_ms"
    assert call[call.index("--stage") + 1] == "performance_baseline"
    assert call[call.index("--") + 1 :] == ["--device", "auto", "--model", "pkg.models:build"]
    pip = render(_include(bisect_provider="pip"), ROOT)["gatekeeper:bisect"]
    (tmp_path / "p").mkdir()
    env = {
        "CI_PIPELINE_SOURCE": "web",
        "GATEKEEPER_BISECT_GOOD": "2.7.0.dev20250301",
        "GATEKEEPER_BISECT_BAD": "2.7.0.dev20250310",
    }
    code, calls, _ = _run_script(pip, tmp_path / "p", env)
    (call,) = calls
    assert call[call.index("--package") + 1] == "torch"
    assert call[call.index("--index-url") + 1] == INDEX


def test_manual_run_without_a_good_says_what_to_set(job, tmp_path):
    code, calls, err = _run_script(job, tmp_path, {"CI_PIPELINE_SOURCE": "web"})
    assert code == 2
    assert calls == []
    assert "set GATEKEEPER_BISECT_GOOD" in err


def test_scheduled_run_updates_issues_and_bisects_since_green(job, tmp_path):
    for channel in ("stable", "nightly"):
        (tmp_path / "artifacts" / channel).mkdir(parents=True)
        (tmp_path / "artifacts" / channel / "verdict.json").write_text("{}")
    code, calls, _ = _run_script(job, tmp_path, {"CI_PIPELINE_SOURCE": "schedule"})
    assert code == 0
    assert calls[0] == ["notify", "issue", "--verdict", "artifacts/nightly/verdict.json"]
    assert calls[1] == ["notify", "issue", "--verdict", "artifacts/stable/verdict.json"]
    bisect = calls[2]
    assert bisect[:3] == ["bisect", "--since-green", ".gatekeeper-cache/bisect/nightly.json"]
    assert bisect[bisect.index("--verdict") + 1] == "artifacts/nightly/verdict.json"
    assert bisect[bisect.index("--index-url") + 1] == INDEX
    assert len(calls) == 3  # no finished bisect.json: no issue filed
    # a finished bisection files its issue
    (tmp_path / "artifacts" / "bisect").mkdir(parents=True, exist_ok=True)
    (tmp_path / "artifacts" / "bisect" / "bisect.json").write_text('{\n  "status": "done"\n}\n')
    (tmp_path / "calls.jsonl").unlink()
    _, calls, _ = _run_script(job, tmp_path, {"CI_PIPELINE_SOURCE": "schedule"})
    assert calls[-1] == ["notify", "issue", "--bisect", "artifacts/bisect/bisect.json"]


def test_a_night_with_nothing_since_green_bisects_the_history_change_when_a_store_is_recorded(job, tmp_path):
    """--since-change runs after --since-green found nothing (exit 0, no bisect.json), only with a history store
    (the record input), its state in the job's cache, the stage and channel left to the change."""
    (tmp_path / "artifacts" / "nightly").mkdir(parents=True)
    (tmp_path / "artifacts" / "nightly" / "verdict.json").write_text("{}")
    env = {"CI_PIPELINE_SOURCE": "schedule", "GATEKEEPER_RECORD": "postgresql://gk@db.example.invalid/gk"}
    code, calls, _ = _run_script(job, tmp_path, {**env, "GATEKEEPER_BISECT_METRIC": "latency_ms"})
    assert code == 0
    assert calls[1][:2] == ["bisect", "--since-green"]
    change = calls[2]
    assert change[:5] == ["bisect", "--since-change", ".gatekeeper-cache/bisect/changes.json", "--history",
                          env["GATEKEEPER_RECORD"]]  # fmt: skip
    assert change[change.index("--index-url") + 1] == INDEX
    assert change[change.index("--metric") + 1] == "latency_ms"
    assert change[change.index("--out") + 1] == "artifacts/bisect"
    judge = change[: change.index("--")]
    assert "--stage" not in judge
    assert "--channel" not in judge
    assert change[change.index("--") + 1 :] == ["--device", "auto"]
    assert job["cache"][0]["paths"] == [".gatekeeper-cache/bisect/"]  # the state file is kept where since-green's is
    # a bisection since green ran (its bisect.json): no second one tonight
    (tmp_path / "artifacts" / "bisect" / "bisect.json").write_text('{\n  "status": "done"\n}\n')
    (tmp_path / "calls.jsonl").unlink()
    _, calls, _ = _run_script(job, tmp_path, env)
    assert [c[1] for c in calls if c[0] == "bisect"] == ["--since-green"]
    # no history store: since-green only; a manual run: the given range only
    (tmp_path / "artifacts" / "bisect" / "bisect.json").unlink()
    (tmp_path / "calls.jsonl").unlink()
    _, calls, _ = _run_script(job, tmp_path, {"CI_PIPELINE_SOURCE": "schedule"})
    assert [c[1] for c in calls if c[0] == "bisect"] == ["--since-green"]
    (tmp_path / "calls.jsonl").unlink()
    _, calls, _ = _run_script(job, tmp_path, {**env, "CI_PIPELINE_SOURCE": "web", "GATEKEEPER_BISECT_GOOD": "v1"})
    assert [c[1] for c in calls if c[0] == "bisect"] == ["--provider"]


def test_since_change_is_not_run_after_a_since_green_that_failed(tmp_path):
    job = render(_include(), ROOT)["gatekeeper:bisect"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.jsonl"
    fake = bin_dir / "gatekeeper"
    fake.write_text(f'#!/bin/sh\necho "$1 $2" >> {log}\n[ "$1" = bisect ] && exit 2\nexit 0\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", **{k: str(v) for k, v in job["variables"].items()},
           "CI_PIPELINE_SOURCE": "schedule", "GATEKEEPER_RECORD": "sqlite:h.db"}  # fmt: skip
    res = subprocess.run(["bash", "-ec", "\n".join(job["script"])], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    assert res.returncode == 2  # since-green's exit code, not hidden
    assert log.read_text().splitlines() == ["bisect --since-green"]


def test_since_green_from_the_command_line(tmp_path, capsys):
    from gatekeeper import cli

    green = _night(tmp_path, "pass", torch="2.7.0.dev20250301", commit="a" * 40, name="g.json")
    argv = ["bisect", "--since-green", str(tmp_path / "state.json"), "--verdict", str(green), "--index-url", INDEX]
    assert (
        cli.main([*argv, "--stage", "performance_baseline", "--out", str(tmp_path / "b"), "--", "--device", "cpu"]) == 0
    )
    assert "not bisecting" in capsys.readouterr().out
    assert not (tmp_path / "b").exists()
    assert cli.main(["bisect", "--verdict", str(green), "--provider", "git", "--good", "a", "--bad", "b"]) == 2
    assert "--verdict goes with --since-green" in capsys.readouterr().err


HOSTILE_STATES = {
    "not JSON": "{",
    "a list": "[1, 2]",
    "a duplicate key": '{"schema": "gatekeeper.bisect-nightly/v1", "result": "blocked", "result": "pass"}',
    "another result word": '{"schema": "gatekeeper.bisect-nightly/v1", "result": "green"}',
    "a commit that is no SHA": '{"schema": "gatekeeper.bisect-nightly/v1", "result": "pass", "commit": "--output=x"}',
    "a torch that is a number": '{"schema": "gatekeeper.bisect-nightly/v1", "result": "pass", "torch_version": 2.7}',
    "deep nesting": "[" * 5000 + "]" * 5000,
}


@pytest.mark.parametrize("text", HOSTILE_STATES.values(), ids=HOSTILE_STATES)
def test_a_hostile_state_is_set_aside_with_its_reason_and_tonight_recorded(tmp_path: Path, text: str) -> None:
    # The state lives in the job's cache (any job with the cache can write it): a bad one is no previous night,
    # said in the reason, never a bisection from a night it made up, never exit 70.
    state = tmp_path / "nightly.json"
    state.write_text(text, encoding="utf-8")
    red = _night(tmp_path, "blocked", torch="2.7.0.dev20250302+rocm6.2", commit="b" * 40, name="n.json")
    plan = plan_since_green(verdict=red, state=state, index_url=INDEX)
    assert plan.provider is None
    assert "the state file was set aside" in plan.reason
    assert str(state) in plan.reason
    assert json.loads(state.read_text())["result"] == "blocked"  # tonight, valid for the next night's reader
    plan = plan_since_green(verdict=red, state=state, index_url=INDEX)
    assert "set aside" not in plan.reason


def test_a_directory_where_the_state_belongs_is_exit_2(tmp_path: Path) -> None:
    state = tmp_path / "nightly.json"
    state.mkdir()
    red = _night(tmp_path, "blocked", torch="2.7.0.dev20250302+rocm6.2", commit="b" * 40, name="n.json")
    with pytest.raises(InputError, match="is a directory"):
        plan_since_green(verdict=red, state=state, index_url=INDEX)
