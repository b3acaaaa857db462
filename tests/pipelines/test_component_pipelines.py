"""The component as gitlab-ci-local renders and runs it: with no inputs and with a version
(``--preview``, validated against GitLab's schema), included as a CI/CD component of this
project (component context: ``$[[ component.version ]]`` reads as the commit SHA there),
a job refusing a gatekeeper of another version, and this repository's own pipeline in a
tag context (the release jobs). Needs the tools of test_gitlab_ci_local.py; skips without.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gatekeeper import __version__
from gatekeeper.core import proc
from tests.pipelines.test_gitlab_ci_local import CONTEXTS, MISSING, _summary, gcl, list_jobs, make_repo, needs_gcl
from tests.test_ci_templates import ROOT, validate

pytestmark = [pytest.mark.slow, needs_gcl]

GIT = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid"]
# Inputs that keep the jobs on this machine: gatekeeper is the checkout (the shim), no network.
OFFLINE = {"install": "", "nightly_index_url": "none", "baseline": ""}


def preview(repo: Path) -> dict[str, Any]:
    res = gcl(repo, "--preview", timeout=120)
    assert res.ok, res.describe()
    text = res.stdout[res.stdout.index("---\n") :]
    doc = yaml.safe_load(text)
    return {k: v for k, v in doc.items() if not k.startswith(".")}


def _commit(repo: Path) -> str:
    for argv in (["git", "add", "-A"], [*GIT, "commit", "-qm", "update"]):
        res = proc.run(argv, timeout=60, cwd=repo)
        assert res.ok, res.describe()
    return proc.run(["git", "rev-parse", "HEAD"], timeout=60, cwd=repo).stdout.strip()


def _gatekeeper_jobs(doc: dict[str, Any]) -> dict[str, Any]:
    jobs = {k: v for k, v in doc.items() if k.startswith("gatekeeper:")}
    assert {"gatekeeper:gate", "gatekeeper:report", "gatekeeper:breaker-reset"} <= set(jobs)
    return jobs


def test_no_inputs_renders_valid_and_pinned(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {})
    (repo / ".gitlab-ci.yml").write_text("include:\n  - local: ci/gatekeeper.yml\n")
    _commit(repo)
    doc = preview(repo)
    validate(doc)
    for name, job in _gatekeeper_jobs(doc).items():
        assert job["variables"]["GATEKEEPER_VERSION"] == __version__, name
        assert job["variables"]["GATEKEEPER_INSTALL"] == "registry", name
        assert any('"gatekeeper-rocm==$GATEKEEPER_VERSION"' in line for line in job["before_script"]), name
    assert doc["gatekeeper:gate"]["variables"]["GATEKEEPER_BASELINE"] == "gitlab:"
    # performance_baseline samples in rounds against the same store, within max_processes (a number input)
    perf = doc["gatekeeper:performance_baseline"]["variables"]
    assert (perf["GATEKEEPER_ROUNDS_BASELINE"], perf["GATEKEEPER_MAX_PROCESSES"]) == ("gitlab:", "20")


def test_with_a_version_renders_valid_and_pinned(tmp_path: Path) -> None:
    image = "$CI_REGISTRY/platform/gatekeeper/cpu:$GATEKEEPER_VERSION"
    repo = make_repo(tmp_path, {"version": "1.2.3", "image": image, "functional_test_args": "--opinfo"})
    doc = preview(repo)
    validate(doc)
    for name, job in _gatekeeper_jobs(doc).items():
        assert job["variables"]["GATEKEEPER_VERSION"] == "1.2.3", name
        assert job["image"]["name"] == image, name
    assert doc["gatekeeper:functional_test"]["variables"]["GATEKEEPER_STAGE_ARGS"] == "--opinfo"
    for stage in ("verify_hip", "performance_baseline", "compatibility_check"):
        assert doc[f"gatekeeper:{stage}"]["variables"]["GATEKEEPER_STAGE_ARGS"] == ""


def test_a_job_refuses_gatekeeper_of_another_version(tmp_path: Path) -> None:
    # The job's gatekeeper is this checkout; the component is told it is 9.9.9.
    repo = make_repo(tmp_path, {**OFFLINE, "version": "9.9.9", "channels": ["stable"]})
    job = "gatekeeper:gate: [stable]"
    res = gcl(repo, "--force-shell-executor", "--shell-isolation", job, timeout=120)
    # FAIL, not WARN: exit 2 is not a code the gate may fail with
    assert _summary(res).get(job) == "FAIL", res.stdout[-3000:]
    assert f"this component runs gatekeeper 9.9.9, the job has gatekeeper {__version__}" in res.stdout
    assert "gatekeeper evaluate" not in res.stdout.split("this component runs")[-1], "nothing ran after the refusal"


def _component_repo(base: Path, inputs: dict[str, Any]) -> tuple[Path, str]:
    """This project as gitlab-ci-local sees it: its remote names it, its catalog copy is in templates/."""
    repo = make_repo(base, inputs)
    (repo / "ci" / "gatekeeper.yml").unlink()
    (repo / "templates").mkdir()
    shutil.copy(ROOT / "templates" / "gatekeeper.yml", repo / "templates" / "gatekeeper.yml")
    lines = ["include:", "  - component: $CI_SERVER_HOST/platform/gatekeeper/gatekeeper@$CI_COMMIT_SHA", "    inputs:"]
    lines += [f"      {k}: {json.dumps(v)}" for k, v in inputs.items()]
    (repo / ".gitlab-ci.yml").write_text("\n".join(lines) + "\n")
    res = proc.run(
        ["git", "remote", "add", "origin", "git@gitlab.example.com:platform/gatekeeper.git"], timeout=30, cwd=repo
    )
    assert res.ok, res.describe()
    return repo, _commit(repo)


def test_catalog_component_gets_its_component_context(tmp_path: Path) -> None:
    repo, sha = _component_repo(tmp_path, OFFLINE)
    doc = preview(repo)
    validate(doc)
    for name, job in _gatekeeper_jobs(doc).items():
        assert job["variables"]["GATEKEEPER_COMPONENT_VERSION"] == sha, name
        assert job["variables"]["GATEKEEPER_VERSION"] == __version__, name
    # included by SHA, the component runs the gatekeeper it pins
    res = gcl(repo, "--force-shell-executor", "--shell-isolation", "gatekeeper:breaker-reset", timeout=120)
    assert _summary(res).get("gatekeeper:breaker-reset") == "PASS", res.stdout[-3000:]
    assert "reset" in res.stdout


def test_own_pipeline_release_jobs_render_in_a_tag_context(tmp_path: Path) -> None:
    if MISSING:
        pytest.skip(MISSING)
    repo = tmp_path / "gatekeeper"
    for rel in (".gitlab-ci.yml", "ci-templates/gatekeeper.yml", "templates/gatekeeper.yml"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, repo / rel)
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], [*GIT, "commit", "-qm", "release"]):
        assert proc.run(argv, timeout=60, cwd=repo).ok
    (tmp_path / "bin").mkdir()
    tag = list_jobs(repo, {"CI_COMMIT_TAG": __version__})
    push = list_jobs(repo, CONTEXTS["push-main"])
    releases = ["release:dist", "release:image-cpu", "release:image-rocm", "release:publish"]
    for name in releases:
        assert tag[name]["when"] == "on_success", name
        assert push[name]["when"] == "never", name
    assert tag["gatekeeper:gate: [nightly]"]["when"] == "never"
    assert tag["gatekeeper:gate: [stable]"]["when"] == "always"
    assert tag["release:publish"]["needs"] is not None
