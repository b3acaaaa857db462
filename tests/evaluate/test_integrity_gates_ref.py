"""Gates from the target branch (issue 12): a merge request cannot weaken the gates that judge it."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.contract.stage_report import write_stage
from gatekeeper.evaluate.gates import parse_gates
from gatekeeper.evaluate.gates_diff import differences
from gatekeeper.evaluate.run import run_evaluate
from tests.support.builders import report

STRICT = """version: 1
gates:
  coverage:
    metric: functional_test.op_pass_rate
    pass: ">= 0.95"
  precision:
    metric: functional_test.max_rel_error
    pass: "<= 0.01"
"""
WEAK = """version: 1
gates:
  coverage:
    metric: functional_test.op_pass_rate
    pass: ">= 0.5"
    severity: advisory
waivers:
  - gate: coverage
    reason: flaky
    owner: mallory
    expires: 2099-01-01
"""


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    import os

    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env={**os.environ, **env}, timeout=60
    ).stdout


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "gates.yaml").write_text(STRICT)
    _git(repo, "add", "gates.yaml")
    _git(repo, "commit", "-qm", "gates")
    _git(repo, "checkout", "-qb", "feature")
    (repo / "gates.yaml").write_text(WEAK)  # the merge request's own, weakened copy
    write_stage(report("functional_test", metrics={"op_pass_rate": 0.6, "max_rel_error": 0.001}), repo / "arts")
    monkeypatch.chdir(repo)
    return repo


def test_the_target_branch_gates_apply_and_the_weakening_is_named(repo):
    verdict = run_evaluate(
        artifacts=Path("arts"), gates_path=Path("gates.yaml"), out=Path("out"), environ={}, gates_ref="refs/heads/main"
    )
    assert verdict.result == "blocked"  # main's >= 0.95 applied, not the MR's >= 0.5 with a waiver
    assert {g.name for g in verdict.gates} == {"coverage", "precision"}
    text = "\n".join(verdict.warnings)
    assert "coverage" in text
    assert ">= 0.95 -> >= 0.5" in text
    assert "weakened" in text
    assert "severity blocking -> advisory" in text
    assert "precision" in text
    assert "removed" in text
    assert "waiver added" in text
    assert "mallory" in text
    doc = json.loads(Path("out/verdict.json").read_text())
    assert doc["provenance"]["gates_ref"] == "refs/heads/main"
    assert doc["provenance"]["gates_sha256"] == hashlib.sha256(STRICT.encode()).hexdigest()


def test_same_gates_no_warning(repo):
    Path("gates.yaml").write_text(STRICT)
    verdict = run_evaluate(
        artifacts=Path("arts"), gates_path=Path("gates.yaml"), out=Path("out"), environ={}, gates_ref="refs/heads/main"
    )
    assert verdict.warnings == ()


def test_an_unknown_ref_is_exit_2(repo, capsys):
    rc = main(["evaluate", "--artifacts", "arts", "--out", "out", "--gates-ref", "refs/heads/no-such-branch"])
    assert rc == 2
    assert "no-such-branch" in capsys.readouterr().err


def test_a_gates_file_the_target_does_not_have_gets_the_builtin_defaults(repo):
    _git(repo, "rm", "-q", "--cached", "gates.yaml")
    _git(repo, "commit", "-qm", "no gates")
    _git(repo, "branch", "-q", "bare")
    verdict = run_evaluate(
        artifacts=Path("arts"), gates_path=Path("gates.yaml"), out=Path("out"), environ={}, gates_ref="refs/heads/bare"
    )
    assert "operator-coverage" in {g.name for g in verdict.gates}  # the built-in defaults
    assert any("refs/heads/bare has no gates.yaml" in w for w in verdict.warnings)


def test_every_kind_of_difference_is_named():
    base = parse_gates(
        {
            "version": 1,
            "gates": {
                "a": {"metric": "s.m", "pass": "<= 5", "on_missing": "fail"},
                "b": {"metric": "s.n", "pass": ">= 1", "max_skipped": 0},
            },
        }
    )
    mine = parse_gates(
        {
            "version": 1,
            "gates": {
                "a": {"metric": "s.m", "pass": "<= 9", "on_missing": "skip", "mode": "shadow"},
                "b": {"metric": "s.n", "pass": ">= 2"},
                "c": {"metric": "s.o", "pass": "== 0"},
            },
            "channels": {"stable": {"b": {"severity": "advisory"}}},
            "anchor": {"window_days": 30, "window_runs": 2},
        }
    )
    text = "\n".join(differences(base, mine, ref="main"))
    assert "anchor window 30 days/20 runs -> 30 days/2 runs (weakened)" in text
    assert "gate a: pass <= 5 -> <= 9 (weakened)" in text
    assert "gate a: on_missing fail -> skip (weakened)" in text
    assert "gate a: mode enforce -> shadow (weakened)" in text
    assert "gate b: pass >= 1 -> >= 2" in text
    assert "gate b: pass >= 1 -> >= 2 (weakened)" not in text
    assert "gate b: max_skipped 0 -> none (weakened)" in text
    assert "gate c: added" in text
    assert "channel stable: gate b: severity blocking -> advisory (weakened)" in text
    assert "channel nightly" not in text  # the override is stable's only


def test_template_gate_job_takes_the_gates_from_the_target_branch():
    from tests.test_ci_templates import ROOT, _include, render

    script = "\n".join(render(_include(), ROOT)["gatekeeper:gate"]["script"])
    assert 'export GATEKEEPER_GATES_REF="refs/remotes/origin/$target"' in script
    assert '${GATEKEEPER_GATES_REF:+--gates-ref "$GATEKEEPER_GATES_REF"}' in script
