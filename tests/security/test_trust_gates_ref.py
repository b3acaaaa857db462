"""Issue 23, principle 2: --gates-ref names one commit unambiguously, and the gates file is read from that
commit's tree (a symlink is followed inside the tree, never through the work tree)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.contract.stage_report import write_stage
from tests.support.builders import report

STRICT = """version: 1
gates:
  coverage:
    metric: functional_test.op_pass_rate
    pass: ">= 0.95"
"""
WEAK = STRICT.replace(">= 0.95", ">= 0.5")
MR = {"CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_IID": "7"}


def _git(repo: Path, *args: str) -> str:
    ident = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env={**os.environ, **ident}, timeout=60
    ).stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """main has the strict gates (and a remote-tracking copy, as the template fetches it); the merge
    request's branch ``feature`` is checked out. The run (coverage 0.6) passes only under WEAK."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "gates.yaml").write_text(STRICT)
    _commit(repo, "gates")
    _git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    _git(repo, "checkout", "-qb", "feature")
    write_stage(report("functional_test", metrics={"op_pass_rate": 0.6}), tmp_path / "arts")
    monkeypatch.chdir(repo)
    return repo


def _evaluate(tmp_path, ref: str) -> int:
    return main(["evaluate", "--artifacts", str(tmp_path / "arts"), "--out", str(tmp_path / "out"), "--gates-ref", ref])


def _result(tmp_path) -> str:
    import json

    return json.loads((tmp_path / "out" / "verdict.json").read_text())["result"]


def test_a_tag_cannot_shadow_the_target_branch(repo, tmp_path, capsys):
    """The finding: a tag named origin/main made --gates-ref origin/main the merge request's own commit."""
    (repo / "gates.yaml").write_text(WEAK)
    _commit(repo, "weaken")
    _git(repo, "tag", "origin/main")  # refs/tags/origin/main, which git prefers to refs/remotes/origin/main
    assert _evaluate(tmp_path, "origin/main") == 2
    err = capsys.readouterr().err
    assert "origin/main" in err
    assert "refs/remotes/origin/main" in err
    assert _evaluate(tmp_path, "refs/remotes/origin/main") == 1  # main's strict gates judge it
    assert _result(tmp_path) == "blocked"


@pytest.mark.parametrize("name", ["main", "HEAD", "origin/main", "refs/../HEAD", "-rf", "abc1234"])
def test_short_or_ambiguous_names_are_refused(repo, tmp_path, capsys, name):
    assert _evaluate(tmp_path, name) == 2
    assert "--gates-ref" in capsys.readouterr().err


def test_a_full_sha_and_a_fully_qualified_ref_are_accepted(repo, tmp_path, capsys):
    sha = _git(repo, "rev-parse", "main")
    assert _evaluate(tmp_path, sha) == 1
    assert _evaluate(tmp_path, "refs/heads/main") == 1
    _git(repo, "tag", "-a", "-m", "release", "v1", "main")
    assert _evaluate(tmp_path, "refs/tags/v1") == 1  # an annotated tag is peeled to its commit


def test_a_sha_that_is_not_a_commit_here_is_refused(repo, tmp_path, capsys):
    assert _evaluate(tmp_path, "0" * 40) == 2
    assert "0000000000" in capsys.readouterr().err


def test_a_symlinked_gates_file_in_the_merge_request_still_gets_the_targets_gates(repo, tmp_path, capsys):
    """The finding: gates.yaml -> ci/gates.yaml made the lookup miss and the built-in defaults judge it."""
    (repo / "ci").mkdir()
    (repo / "ci" / "gates.yaml").write_text(WEAK)
    (repo / "gates.yaml").unlink()
    (repo / "gates.yaml").symlink_to("ci/gates.yaml")
    _commit(repo, "move gates")
    assert _evaluate(tmp_path, "refs/remotes/origin/main") == 1
    assert _result(tmp_path) == "blocked"
    err = capsys.readouterr().err
    assert "built-in" not in err
    assert ">= 0.95 -> >= 0.5 (weakened)" in (tmp_path / "out" / "verdict.md").read_text().replace("\\", "")


def test_a_symlink_at_the_ref_is_followed_inside_its_tree(repo, tmp_path, capsys):
    _git(repo, "checkout", "-q", "main")
    (repo / "ci").mkdir()
    (repo / "ci" / "gates.yaml").write_text(STRICT)
    (repo / "gates.yaml").unlink()
    (repo / "gates.yaml").symlink_to("ci/gates.yaml")
    _commit(repo, "gates through a link")
    _git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    _git(repo, "checkout", "-q", "feature")
    (repo / "ci").mkdir(exist_ok=True)
    (repo / "ci" / "gates.yaml").write_text(WEAK)  # the work tree's copy at the link's target: never read
    assert _evaluate(tmp_path, "refs/remotes/origin/main") == 1
    assert _result(tmp_path) == "blocked"


@pytest.mark.parametrize("target", ["../outside.yaml", "/etc/hostname", "ci/missing.yaml", "loop.yaml", "ci"])
def test_a_symlink_at_the_ref_that_leaves_the_tree_or_dangles_is_refused(repo, tmp_path, capsys, target):
    _git(repo, "checkout", "-q", "main")
    (repo / "ci").mkdir()
    (repo / "ci" / "other.yaml").write_text(STRICT)
    (repo / "loop.yaml").symlink_to("gates.yaml")
    (repo / "gates.yaml").unlink()
    (repo / "gates.yaml").symlink_to(target)
    _commit(repo, "bad link")
    _git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    _git(repo, "checkout", "-q", "feature")
    (repo / "ci").mkdir(exist_ok=True)
    (repo / "ci" / "missing.yaml").write_text(WEAK)  # exists in the work tree only
    (tmp_path / "outside.yaml").write_text(WEAK)
    assert _evaluate(tmp_path, "refs/remotes/origin/main") == 2
    err = capsys.readouterr().err
    assert "gates.yaml" in err
    assert "refs/remotes/origin/main" in err


def test_gates_missing_at_the_ref_are_an_input_error_in_a_merge_request(repo, tmp_path, capsys, monkeypatch):
    """Never silently the (looser) built-in defaults in a merge request: exit 2 with the fix."""
    _git(repo, "checkout", "-q", "main")
    _git(repo, "rm", "-q", "gates.yaml")
    _commit(repo, "no gates")
    _git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    _git(repo, "checkout", "-q", "feature")
    for name, value in MR.items():
        monkeypatch.setenv(name, value)
    assert _evaluate(tmp_path, "refs/remotes/origin/main") == 2
    err = capsys.readouterr().err
    assert "no gates.yaml" in err
    assert "hint" in err
    assert not (tmp_path / "out" / "verdict.json").exists()


def test_the_template_passes_a_fully_qualified_ref():
    from tests.test_ci_templates import ROOT, _include, render

    script = "\n".join(render(_include(), ROOT)["gatekeeper:gate"]["script"])
    assert 'GATEKEEPER_GATES_REF="refs/remotes/origin/$target"' in script
    assert 'GATEKEEPER_GATES_REF="origin/' not in script


def test_stage_jobs_never_pass_on_a_file_named_like_the_gates_outputs():
    """A stage job runs the merge request's code: a verdict.json it writes must not reach the failure job."""
    from gatekeeper.evaluate.outputs import OUTPUTS
    from tests.test_ci_templates import ROOT, _include, render

    jobs = render(_include(), ROOT)
    for stage in ("verify_hip", "functional_test", "performance_baseline", "compatibility_check"):
        excluded = jobs[f"gatekeeper:{stage}"]["artifacts"].get("exclude", [])
        assert {f"artifacts/**/{name}" for name in OUTPUTS} <= set(excluded), stage
