"""Run a sample model repository that includes the gatekeeper component
through gitlab-ci-local (jobs run on this machine with the shell executor).

Five pipeline contexts are checked through ``--list-json`` (which jobs run,
``when``, ``allow_failure`` after rules), and real pipelines are run with
``--shell-isolation`` (artifacts and cache pass between jobs as in GitLab):
a planted failing gate blocks on main and not in a merge request into another
branch, the failure job fires and writes a diagnosis, and a nightly job whose
tag rule was edited away is still refused by ``gatekeeper breaker check``.

Needs node 22+, gitlab-ci-local and rsync: ``bash scripts/setup_ci_tools.sh``
installs them (into .ci-tools/, found here without touching PATH). Without
them these tests skip, naming what is missing; under GATEKEEPER_REQUIRE_TOOLS=1 (CI)
that skip is a failure (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.core import proc

ROOT = Path(__file__).resolve().parents[2]
TOOLS_BIN = ROOT / ".ci-tools" / "node_modules" / ".bin"
STAGES = ["verify_hip", "functional_test", "performance_baseline", "compatibility_check"]
PREDEFINED = ",".join(
    ["CI_PIPELINE_SOURCE", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "CI_MERGE_REQUEST_IID", "CI_COMMIT_TAG"]
)

pytestmark = pytest.mark.slow


def _tool_path() -> str:
    return os.pathsep.join([str(TOOLS_BIN), os.environ.get("PATH", "")])


def _missing_tools() -> str | None:
    path = _tool_path()
    gcl = shutil.which("gitlab-ci-local", path=path)
    if gcl is None:
        return "gitlab-ci-local not installed (run: bash scripts/setup_ci_tools.sh)"
    node = proc.run(["node", "-p", "process.versions.node"], timeout=30, env={**os.environ, "PATH": path})
    if not node.ok or int(node.stdout.strip().split(".")[0]) < 22:
        return f"gitlab-ci-local needs node 22+ (found {node.stdout.strip() or 'none'}; run scripts/setup_ci_tools.sh)"
    if shutil.which("rsync") is None:
        return "rsync not installed (gitlab-ci-local --shell-isolation needs it; apt-get install rsync)"
    return None


MISSING = _missing_tools()
# A skip, which tests/conftest.py turns into a failure under GATEKEEPER_REQUIRE_TOOLS=1 (CI installs the tools).
needs_gcl = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


SAMPLE_GATES = """\
# The sample repo's gates: what verify_hip measures, nothing the disabled stages would.
version: 1
gates:
  device-required:
    description: A GPU must be visible when the job runs on a GPU runner.
    metric: verify_hip.device_available
    pass: ">= 1"
    when: {env: {GATEKEEPER_REQUIRE_DEVICE: "1"}}
  smoke-kernels:
    description: Smoke kernels match the CPU float64 reference.
    metric: verify_hip.checks.failed
    pass: "== 0"
"""


def _pipeline(inputs: dict[str, Any], extra: str = "") -> str:
    lines = ["include:", "  - local: ci/gatekeeper.yml", "    inputs:"]
    lines += [f"      {k}: {json.dumps(v)}" for k, v in inputs.items()]
    return "\n".join(lines) + "\n" + extra


def make_repo(base: Path, inputs: dict[str, Any], extra: str = "") -> Path:
    """A model repository: the component copied in, a gates file, a git history on main."""
    repo = base / "model-repo"
    (repo / "ci").mkdir(parents=True)
    shutil.copy(ROOT / "ci-templates" / "gatekeeper.yml", repo / "ci" / "gatekeeper.yml")
    (repo / "gates.yaml").write_text(SAMPLE_GATES)
    (repo / ".gitlab-ci.yml").write_text(_pipeline(inputs, extra))
    (repo / ".gitignore").write_text(".gitlab-ci-local/\nartifacts/\n.gatekeeper-cache/\n.gatekeeper-tmp/\n")
    # The jobs call `gatekeeper`: this checkout, run by the interpreter running the tests.
    shim = base / "bin" / "gatekeeper"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m gatekeeper "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid"]
    # The merge-request gate job applies the gates file of the target branch (origin/<target>):
    # as in a GitLab clone, the target branches exist as remote-tracking refs.
    steps = (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        [*git, "commit", "-qm", "sample"],
        ["git", "update-ref", "refs/remotes/origin/main", "HEAD"],
        ["git", "update-ref", "refs/remotes/origin/dev", "HEAD"],
    )
    for argv in steps:
        res = proc.run(argv, timeout=60, cwd=repo)
        assert res.ok, res.describe()
    return repo


def gcl(repo: Path, *args: str, variables: dict[str, str] | None = None, timeout: float = 240) -> proc.ProcResult:
    argv = ["gitlab-ci-local", "--ignore-predefined-vars", PREDEFINED, "--no-color", *args]
    for key, value in (variables or {}).items():
        argv += ["--variable", f"{key}={value}"]
    # Only the sample pipeline's own context: when these tests themselves run in
    # a GitLab job, its CI_*/GITLAB_* variables (a tag, an MR) must not leak into
    # the inner jobs, which inherit this environment; CI=true also changes
    # gitlab-ci-local's own behaviour.
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "CI" and not k.startswith(("CI_", "GITLAB_", "GATEKEEPER_", "TORCHINDUCTOR_", "MIOPEN_"))
    }
    env["PATH"] = os.pathsep.join([str(repo.parent / "bin"), _tool_path()])
    # gitlab-ci-local reads $HOME/.gitlab-ci-local/variables.yml: never the real one.
    env["HOME"] = str(repo.parent)
    return proc.run(argv, timeout=timeout, cwd=repo, env=env)


def list_jobs(repo: Path, variables: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    res = gcl(repo, "--list-json", variables=variables, timeout=120)
    assert res.ok, res.describe()
    text = res.stdout[res.stdout.index("\n[") + 1 :] if not res.stdout.startswith("[") else res.stdout
    return {job["name"]: job for job in json.loads(text)}


CONTEXTS: dict[str, dict[str, str]] = {
    "push-main": {},
    "mr-to-main": {
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
        "CI_MERGE_REQUEST_IID": "7",
    },
    "mr-to-dev": {
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "dev",
        "CI_MERGE_REQUEST_IID": "8",
    },
    "tag": {"CI_COMMIT_TAG": "v1.0.0"},
    "nightly-schedule": {"CI_PIPELINE_SOURCE": "schedule"},
}


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, Any]]]:
    if MISSING:
        pytest.skip(MISSING)
    repo = make_repo(tmp_path_factory.mktemp("listed"), {"install": "", "nightly_index_url": "none", "baseline": ""})
    return {name: list_jobs(repo, variables) for name, variables in CONTEXTS.items()}


def _stage_jobs(channel: str) -> list[str]:
    return [f"gatekeeper:{s}: [{channel}]" for s in STAGES] + [f"gatekeeper:gate: [{channel}]"]


@needs_gcl
@pytest.mark.parametrize("context", list(CONTEXTS))
def test_jobs_per_context(listed: dict[str, dict[str, dict[str, Any]]], context: str) -> None:
    jobs = listed[context]
    assert jobs["gatekeeper:diagnose"]["when"] == "always"  # diagnoses red pipelines, announces recoveries
    for name in _stage_jobs("stable"):
        assert jobs[name]["when"] in ("on_success", "always"), name
    for name in _stage_jobs("nightly"):
        expected_never = context == "tag"
        assert (jobs[name]["when"] == "never") is expected_never, (context, name, jobs[name]["when"])
    gate = jobs["gatekeeper:gate: [stable]"]
    assert gate["when"] == "always"
    assert jobs["gatekeeper:report"]["when"] == "always"
    assert jobs["gatekeeper:breaker-reset"]["when"] == ("never" if context == "tag" else "manual")
    if context == "mr-to-dev":
        # Merge requests into a branch other than the protected one never block.
        for name in _stage_jobs("stable") + _stage_jobs("nightly"):
            assert jobs[name]["allow_failure"] is True, name
    else:
        # no failure code at all there, 3 and 4 included (issue 23: the rule's allow_failure: false
        # drops the job's exit_codes, in gitlab-ci-local as in GitLab)
        assert gate["allow_failure"] is False, context
        for s in STAGES:
            # a tag, the protected branch (push or schedule) or an MR into it: the stable channel
            # may not fail, exit 4 included (issue 12: the breaker never skips it there)
            assert jobs[f"gatekeeper:{s}: [stable]"]["allow_failure"] is False, (context, s)
    if context == "mr-to-main":
        # The nightly channel is advisory on merge requests (input nightly_blocking: false).
        for name in _stage_jobs("nightly"):
            assert jobs[name]["allow_failure"] is True, name
    elif context in ("push-main", "nightly-schedule"):
        # On the protected branch it runs fully and blocks, with no failure code allowed.
        assert jobs["gatekeeper:gate: [nightly]"]["allow_failure"] is False


# gitlab-ci-local counts a job with `allow_failure: exit_codes` as allowed to
# fail whatever its exit code when it decides the pipeline result and whether
# `when: on_failure` jobs start (its job status, FAIL vs WARN, is right). GitLab
# fails the pipeline for an exit code not in the list. The sample repo restores
# GitLab's behaviour for the gate's exit 1 so the pipeline result is GitLab's.
GCL_EXIT_CODES_WORKAROUND = """
gatekeeper:gate:
  allow_failure: false
"""
# Only verify_hip runs for real (the other stages take minutes on CPU); the
# gate's and the failure job's needs are optional, so they run without them.
FAST = "".join(
    f"gatekeeper:{s}:\n  rules: [{{when: never}}]\n"
    for s in ["functional_test", "performance_baseline", "compatibility_check"]
)
PLANTED = {
    "install": "",
    "nightly_index_url": "none",
    "baseline": "",
    "channels": ["stable"],
    "gates": "gates.yaml",
    # Planted failure: a GPU is required, and this machine has none.
    "device_required": True,
}


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, proc.ProcResult]]:
    if MISSING:
        pytest.skip(MISSING)
    out = {}
    for name in ("push-main", "mr-to-dev"):
        repo = make_repo(tmp_path_factory.mktemp(name), PLANTED, GCL_EXIT_CODES_WORKAROUND + FAST)
        out[name] = (repo, gcl(repo, "--force-shell-executor", "--shell-isolation", variables=CONTEXTS[name]))
    return out


def _summary(res: proc.ProcResult) -> dict[str, str]:
    """Job name -> PASS/FAIL/WARN from gitlab-ci-local's closing summary."""
    out = {}
    for line in res.stdout.splitlines():
        # " WARN  gatekeeper:gate: [stable]      pre_script": the name ends at a run of spaces.
        m = re.match(r"^\s*(PASS|FAIL|WARN)\s+(\S.*?)(?:\s{2,}.*)?$", line)
        if m:
            out[m.group(2)] = m.group(1)
    return out


@needs_gcl
def test_failing_gate_blocks_on_main(ran: dict[str, tuple[Path, proc.ProcResult]]) -> None:
    repo, res = ran["push-main"]
    summary = _summary(res)
    assert summary.get("gatekeeper:verify_hip: [stable]") == "PASS", res.stdout[-3000:]
    assert summary.get("gatekeeper:gate: [stable]") == "FAIL", res.stdout[-3000:]
    assert res.returncode != 0, "the pipeline must fail on main"
    verdict = json.loads((repo / "artifacts" / "stable" / "verdict.json").read_text())
    assert "device-required" in json.dumps(verdict)


@needs_gcl
def test_failure_job_fires_and_diagnoses(ran: dict[str, tuple[Path, proc.ProcResult]]) -> None:
    repo, res = ran["push-main"]
    assert "gatekeeper:diagnose" in _summary(res), "the failure job did not start"
    analysis = json.loads((repo / "artifacts" / "stable" / "analysis.json").read_text())
    assert analysis["schema"].startswith("gatekeeper.analysis/")
    sources = [Path(i["source"]).name for i in analysis["inputs"]]
    assert "gate.log" in sources, sources
    assert "verify_hip.log" in sources, sources


@needs_gcl
def test_failing_gate_does_not_block_mr_into_other_branch(ran: dict[str, tuple[Path, proc.ProcResult]]) -> None:
    repo, res = ran["mr-to-dev"]
    summary = _summary(res)
    assert summary.get("gatekeeper:gate: [stable]") == "WARN", res.stdout[-3000:]
    assert res.returncode == 0, res.stdout[-3000:]
    # allowed failures do not fail the pipeline; the diagnose job runs in every pipeline and passes
    assert summary.get("gatekeeper:diagnose") == "PASS", res.stdout[-3000:]
    verdict = json.loads((repo / "artifacts" / "stable" / "verdict.json").read_text())
    assert "device-required" in json.dumps(verdict)


@needs_gcl
def test_nightly_refused_on_tag_even_without_the_rule(tmp_path: Path) -> None:
    # Someone "simplified" the rules: the nightly job now runs on tags. The
    # breaker's static policy still refuses it before any device work.
    inputs = {"install": "", "nightly_index_url": "none", "channels": ["nightly"], "baseline": ""}
    inputs["device_required"] = False  # a CPU pipeline
    repo = make_repo(tmp_path, inputs, "gatekeeper:verify_hip:\n  rules: [{when: on_success}]\n")
    jobs = list_jobs(repo, CONTEXTS["tag"])
    assert jobs["gatekeeper:verify_hip: [nightly]"]["when"] == "on_success"
    res = gcl(
        repo,
        "--force-shell-executor",
        "--shell-isolation",
        "gatekeeper:verify_hip: [nightly]",
        variables=CONTEXTS["tag"],
        timeout=120,
    )
    # FAIL, not WARN: exit 1 is not the breaker-open code 4 the job may fail with.
    assert _summary(res).get("gatekeeper:verify_hip: [nightly]") == "FAIL", res.stdout[-3000:]
    assert "the nightly channel never runs on tag pipelines" in res.stdout
    assert "gatekeeper stage verify_hip: device" not in res.stdout, "the stage must not start"


@needs_gcl
def test_open_breaker_skips_the_next_pipeline_without_device_work(tmp_path: Path) -> None:
    # Planted stage failure: smoke kernels get no time at all. With
    # breaker_failures: 1 the first failure opens the nightly breaker; its state
    # lives in the job's GitLab cache, so the next pipeline finds it open.
    inputs = {
        "install": "",
        "nightly_index_url": "none",
        "baseline": "",
        "channels": ["nightly"],
        "breaker_failures": 1,
        # a per-stage option: functional_test would refuse it (and is disabled by FAST here)
        "verify_hip_args": "--smoke-timeout 0.001",
        "breaker_reset_job": "verify_hip",
        "device_required": False,  # a CPU pipeline
    }
    repo = make_repo(tmp_path, inputs, FAST)
    job = "gatekeeper:verify_hip: [nightly]"
    first = gcl(repo, "--force-shell-executor", "--shell-isolation", job, variables=CONTEXTS["nightly-schedule"])
    assert _summary(first).get(job) == "FAIL", first.stdout[-3000:]
    assert "recorded fail: now open" in first.stdout, first.stdout[-3000:]
    second = gcl(repo, "--force-shell-executor", "--shell-isolation", variables=CONTEXTS["nightly-schedule"])
    # WARN: exit 4 is in the stage jobs' allow_failure exit_codes: allowed, skipped-looking failures.
    # The gate on the protected branch (main here) never passes on a skip: it fails (exit 1).
    summary = _summary(second)
    assert summary.get(job) == "WARN", second.stdout[-3000:]
    assert summary.get("gatekeeper:gate: [nightly]") == "FAIL", second.stdout[-3000:]
    assert "on tags and on the protected branch that blocks" in second.stdout
    assert "skipped: upstream verify_hip: breaker open since" in second.stdout
    assert "last diagnosis: smoke." in second.stdout
    assert "gatekeeper stage verify_hip: device" not in second.stdout, "no stage work while open"
    # The manual job closes the breaker (it opens the stage job's cache), and the
    # next pipeline runs the stage again.
    reset = gcl(
        repo,
        "--force-shell-executor",
        "--shell-isolation",
        "gatekeeper:breaker-reset",
        variables=CONTEXTS["nightly-schedule"],
        timeout=120,
    )
    assert _summary(reset).get("gatekeeper:breaker-reset") == "PASS", reset.stdout[-3000:]
    assert "nightly/verify_hip" in reset.stdout
    third = gcl(repo, "--force-shell-executor", "--shell-isolation", job, variables=CONTEXTS["nightly-schedule"])
    assert "gatekeeper stage verify_hip: device" in third.stdout, third.stdout[-3000:]


# --- issue 28: the diagnose job explains the first red job, alerts once and announces the recovery ---

# The second pipeline runs functional_test: a missing artifact (the stage refused its --model) blocks.
ALERT_GATES = (
    SAMPLE_GATES
    + """\
  functional-checks:
    description: Every functional_test check that ran passed.
    metric: functional_test.checks.failed
    pass: "== 0"
"""
)
DIAGNOSE_NEEDS = "".join(f"    - {{ job: gatekeeper:{j}, optional: true }}\n" for j in [*STAGES, "gate", "report"])


def _alert_pipeline(repo: Path, inputs: dict[str, Any], extra: str, gates: str) -> None:
    (repo / ".gitlab-ci.yml").write_text(_pipeline(inputs, GCL_EXIT_CODES_WORKAROUND + extra))
    (repo / "gates.yaml").write_text(gates)
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid"]
    for argv in (["git", "add", "-A"], [*git, "commit", "-qm", "the next pipeline"]):
        res = proc.run(argv, timeout=60, cwd=repo)  # the jobs get the committed files, as in a clone
        assert res.ok, res.describe()


def _diagnoses(res: proc.ProcResult) -> dict[str, list[str]]:
    """Per analysed directory: the diagnose job's lines from its "diagnosis of the X channel" header on."""
    out: dict[str, list[str]] = {}
    current = None
    for line in res.stdout.splitlines():
        job = re.match(r"^gatekeeper:diagnose\s+> ?(.*)$", line)  # gitlab-ci-local: "JOB   > output line"
        if job is None:
            continue
        text = job.group(1)
        m = re.search(r"gatekeeper: diagnosis of the (\S+) channel", text)
        if m:
            current = m.group(1)
            out[current] = []
        elif current is not None:
            out[current].append(text)
    return out


@needs_gcl
def test_diagnose_job_alerts_once_and_announces_the_recovery(tmp_path: Path) -> None:
    """A red pipeline (a GPU required on this CPU runner), a red one (a model that does not import,
    and the other planted families of tests/support/planted.py in a job of the model repository)
    and a green one: the diagnose job prints each diagnosis first, sends one Slack alert per failing
    job carrying its diagnosis (none while it keeps failing), and one recovery; the state and the
    spool live in its cache."""
    from tests.support.fake_http import FakeServer
    from tests.support.planted import FAMILIES, PLANTED

    base = {"install": "", "nightly_index_url": "none", "baseline": "", "channels": ["stable"], "gates": "gates.yaml"}
    base["slack"] = True
    repo = make_repo(tmp_path, {**base, "device_required": True}, GCL_EXIT_CODES_WORKAROUND + FAST)
    shutil.copytree(PLANTED / "plantedmodels", repo / "plantedmodels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PLANTED / "cases.py", repo / "cases.py")
    shutil.copy(PLANTED / "gates.yaml", repo / "planted-gates.yaml")
    (repo / ".gitignore").write_text((repo / ".gitignore").read_text() + "baselines/\n.gatekeeper-alerts/\n")
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid"]
    for argv in (["git", "add", "-A"], [*git, "commit", "-qm", "the planted model package"]):
        res = proc.run(argv, timeout=60, cwd=repo)  # jobs get the repository's files, as a clone would
        assert res.ok, res.describe()
    with FakeServer() as slack:
        variables = {**CONTEXTS["push-main"], "SLACK_WEBHOOK_URL": slack.url + "/services/T0/B0/planted"}
        run = ["--force-shell-executor", "--shell-isolation"]

        # red: device_required on a runner without a GPU (verify_hip and the gate run for real)
        red = gcl(repo, *run, variables=variables, timeout=600)
        assert _summary(red).get("gatekeeper:gate: [stable]") == "FAIL", red.stdout[-3000:]
        first = _diagnoses(red)["stable"]
        assert first[0].startswith("failure analysis: device_not_available (from the artifacts: `gate device-required`")
        assert len(slack.seen) == 1, [s.body[:200] for s in slack.seen]

        # red again: the model does not import (the template's functional_test job), and the other
        # families planted by a job of the model repository; the diagnose job walks them all
        plant = f"""
plant-families:
  stage: test
  needs: []
  script:
    - PYTHONPATH="{ROOT}" "{sys.executable}" -m tests.support.planted --gates planted-gates.yaml wrong_kernel slower_model hang segfault
  artifacts: {{when: always, paths: [artifacts/]}}
gatekeeper:diagnose:
  needs:
{DIAGNOSE_NEEDS}    - {{ job: plant-families, optional: true }}
"""
        fast_ft = "".join(
            f"gatekeeper:{s}:\n  rules: [{{when: never}}]\n" for s in ["performance_baseline", "compatibility_check"]
        )
        inputs = {**base, "device_required": False, "model": "plantedmodel.models:build"}
        inputs["functional_test_args"] = "--categories none --no-sparse --checkpoint-trials 0"
        _alert_pipeline(repo, inputs, fast_ft + plant, ALERT_GATES)
        red2 = gcl(repo, *run, variables=variables, timeout=900)
        assert _summary(red2).get("gatekeeper:functional_test: [stable]") == "FAIL", red2.stdout[-3000:]
        found = _diagnoses(red2)
        expected = {"stable": FAMILIES["model_not_importable"]} | {
            n: FAMILIES[n] for n in ("wrong_kernel", "slower_model", "hang", "segfault")
        }
        job_log = "\n".join(line for line in red2.stdout.splitlines() if line.startswith("gatekeeper:diagnose"))
        (tmp_path / "red2.log").write_text(red2.stdout)  # the whole pipeline's output, for a failure
        for where, family in expected.items():
            assert where in found, (where, sorted(found), job_log[-6000:])
            lines = found[where]
            assert lines, (where, job_log[-6000:])
            assert lines[0].startswith(
                f"failure analysis: {family.category} (from the artifacts: `{family.failing}`"
            ), (
                where,
                lines[:3],
            )
            if "log evidence:" in lines:  # the log excerpts come after the category and the failing check
                assert lines.index("log evidence:") > 1
        # The stable gate still fails: no second alert for it. Where the alert state keys an alert by
        # the job that wrote the verdict, the planted verdicts (plant-families') get one alert for
        # their four failing directories; where it keys it by the notifying job, none.
        after_red = len(slack.seen)
        assert after_red in (1, 2), [s.body[:300] for s in slack.seen]
        if after_red == 2:
            assert "gpu_hang_or_timeout" in slack.seen[1].body.decode(), "the first failing directory: hang"

        # green: the recovery is announced once
        _alert_pipeline(repo, {**base, "device_required": False}, FAST, SAMPLE_GATES)
        green = gcl(repo, *run, variables=variables, timeout=600)
        assert green.returncode == 0, green.stdout[-3000:]
        assert _summary(green).get("gatekeeper:diagnose") == "PASS", green.stdout[-3000:]
        messages = [json.dumps(s.json()) for s in slack.seen]
    assert len(messages) == after_red + 1, messages
    assert "device_not_available" in messages[0]
    assert "device-required" in messages[0]
    assert "Failing check" in messages[0]
    assert not any("still failing" in m for m in messages), "no repeat while still failing"
    assert [m for m in messages if "recovered" in m] == [messages[-1]], "the stable gate passes again: one recovery"
