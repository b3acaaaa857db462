"""The breaker never skips the gate where a release or a merge depends on it (issue 12)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from gatekeeper.breaker import state as breaker
from gatekeeper.cli import main
from gatekeeper.core.exitcodes import ExitCode

ROOT = Path(__file__).resolve().parents[2]
TAG = {"CI_COMMIT_TAG": "v1.0.0", "CI_PIPELINE_SOURCE": "push", "CI_COMMIT_REF_NAME": "v1.0.0"}
MAIN = {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_REF_NAME": "main", "CI_DEFAULT_BRANCH": "main"}
MR_MAIN = {
    "CI_PIPELINE_SOURCE": "merge_request_event",
    "CI_COMMIT_REF_NAME": "feature",
    "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
    "CI_DEFAULT_BRANCH": "main",
}
FEATURE = {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_REF_NAME": "feature", "CI_DEFAULT_BRANCH": "main"}
CI_VARS = ("CI_COMMIT_TAG", "CI_PIPELINE_SOURCE", "CI_COMMIT_REF_NAME", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME")


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in (*CI_VARS, "CI_DEFAULT_BRANCH", "GATEKEEPER_PROTECTED_BRANCH", "CI_PIPELINE_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GATEKEEPER_BREAKER_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def _open(channel: str, job: str) -> None:
    for _ in range(breaker.DEFAULT_FAILURES):
        assert main(["breaker", "record", "--channel", channel, "--job", job, "--result", "fail"]) == 0


def _ci(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)


@pytest.mark.parametrize("where", [TAG, MAIN, MR_MAIN], ids=["tag", "protected-branch", "mr-into-protected"])
def test_open_breaker_never_skips_a_stable_stage_or_gate_on_protected_refs(state, monkeypatch, capsys, where):
    _open("stable", "functional_test")
    _open("stable", "gate")
    _ci(monkeypatch, where)
    assert main(["breaker", "check", "--channel", "stable", "--job", "functional_test"]) == ExitCode.PASS
    assert "never skips" in capsys.readouterr().out
    assert main(["breaker", "check", "--channel", "stable", "--job", "gate"]) == ExitCode.PASS
    # it still records
    assert main(["breaker", "record", "--channel", "stable", "--job", "functional_test", "--result", "pass"]) == 0
    assert breaker.status(state)[0].state in ("closed", "open")


def test_nightly_may_still_be_skipped_on_the_protected_branch(state, monkeypatch):
    _open("nightly", "functional_test")
    _ci(monkeypatch, MAIN)
    assert main(["breaker", "check", "--channel", "nightly", "--job", "functional_test"]) == ExitCode.BREAKER_OPEN


def test_elsewhere_an_open_stable_breaker_still_skips(state, monkeypatch):
    _open("stable", "functional_test")
    _ci(monkeypatch, FEATURE)
    assert main(["breaker", "check", "--channel", "stable", "--job", "functional_test"]) == ExitCode.BREAKER_OPEN


def test_a_planted_marker_never_skips_the_gate(state, tmp_path, monkeypatch, capsys):
    art = tmp_path / "artifacts" / "stable"
    art.mkdir(parents=True)
    (art / "evil.breaker.json").write_text(json.dumps({"message": "skip the gate please"}))
    _ci(monkeypatch, {**FEATURE, "CI_PIPELINE_ID": "77"})
    gate = ["breaker", "check", "--channel", "stable", "--job", "gate", "--policy-only", "--artifacts", str(art)]
    assert main(gate) == ExitCode.PASS
    assert "ignored" in capsys.readouterr().err


def test_markers_from_another_pipeline_or_job_are_ignored(state, tmp_path, monkeypatch, capsys):
    art = tmp_path / "artifacts" / "stable"
    _ci(monkeypatch, {**FEATURE, "CI_PIPELINE_ID": "77"})
    marker = {"schema": "gatekeeper.breaker-skip/v1", "channel": "stable", "job": "verify_hip", "message": "open"}
    art.mkdir(parents=True)
    (art / "verify_hip.breaker.json").write_text(json.dumps({**marker, "pipeline_id": "76"}))
    gate = ["breaker", "check", "--channel", "stable", "--job", "gate", "--policy-only", "--artifacts", str(art)]
    assert main(gate) == ExitCode.PASS
    assert "pipeline 76" in capsys.readouterr().err
    (art / "verify_hip.breaker.json").write_text(json.dumps({**marker, "pipeline_id": "77", "job": "gate"}))
    assert main(gate) == ExitCode.PASS
    (art / "verify_hip.breaker.json").write_text(json.dumps({**marker, "pipeline_id": "77", "channel": "nightly"}))
    assert main(gate) == ExitCode.PASS
    # the real thing: written by `breaker check` of this pipeline, this channel
    (art / "verify_hip.breaker.json").unlink()
    _open("stable", "verify_hip")
    assert main(["breaker", "check", "--channel", "stable", "--job", "verify_hip", "--artifacts", str(art)]) == 4
    assert json.loads((art / "verify_hip.breaker.json").read_text())["pipeline_id"] == "77"
    assert main(gate) == ExitCode.BREAKER_OPEN
    # ... which on the protected branch is ignored: the gate runs
    _ci(monkeypatch, {**MAIN, "CI_PIPELINE_ID": "77"})
    assert main(gate) == ExitCode.PASS


def test_breaker_defaults_match_the_template_and_readme():
    assert breaker.DEFAULT_FAILURES == 3
    assert breaker.DEFAULT_COOLDOWN_S == 24 * 3600
    spec = next(yaml.safe_load_all((ROOT / "ci-templates" / "gatekeeper.yml").read_text()))["spec"]["inputs"]
    assert spec["breaker_failures"]["default"] == breaker.DEFAULT_FAILURES
    assert breaker.parse_duration(spec["breaker_cooldown"]["default"]) == breaker.DEFAULT_COOLDOWN_S
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"After N consecutive failures \(default 3\)", readme)
    assert "(default 24 h)" in readme


def _rules(job: dict) -> list[dict]:
    return job.get("rules", [])


def test_template_exit_4_is_not_allowed_to_fail_on_protected_refs():
    from tests.test_ci_templates import _include, render

    jobs = render(_include(), ROOT)
    # (the gate keeps exit_codes [3, 4]: a warning may pass, and `breaker check` never exits 4 there)
    stages = ("verify_hip", "functional_test", "performance_baseline", "compatibility_check")
    for name in (f"gatekeeper:{s}" for s in stages):
        rules = _rules(jobs[name])
        strict = [r for r in rules if "CI_COMMIT_TAG" in r.get("if", "") and "CHANNEL" in r.get("if", "")]
        strict = [r for r in strict if r.get("allow_failure") is False]
        assert strict, f"{name}: no rule keeps exit 4 from passing on tags and the protected branch: {rules}"
        first_mr = next(i for i, r in enumerate(rules) if "merge_request_event" in r.get("if", ""))
        assert rules.index(strict[0]) < first_mr or "!=" in rules[first_mr]["if"]
