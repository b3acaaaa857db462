"""The component's promises that go beyond structure: a component of version X never runs
gatekeeper of version Y, the install is pinned to the project's registry, per-stage
arguments reach only their stage, the nightly wheel is downloaded once a day, the report
and breaker-reset jobs exist, and the catalog copy renders with a component context.

The shell snippets are taken from the rendered jobs and run in bash with fake ``python``
and ``gatekeeper`` commands on PATH that record how they were called.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gatekeeper import __version__
from gatekeeper.core import proc
from tests.test_ci_templates import CATALOG, ROOT, STAGES, TEMPLATE, _include, render, split_component, validate

BASH = shutil.which("bash")  # a missing bash fails the tests that run it (no skip: every runner has one)


def _snippet(job: dict[str, Any], key: str, needle: str) -> str:
    matches = [line for line in job[key] if needle in line]
    assert len(matches) == 1, (needle, matches)
    return matches[0]


def _fake_bin(tmp: Path, gatekeeper_version: str | None) -> Path:
    """``python`` records its argv (one call per line); ``gatekeeper --version`` prints a version."""
    bindir = tmp / "bin"
    bindir.mkdir()
    (bindir / "python").write_text(f'#!/bin/sh\necho "$*" >> "{tmp}/python.calls"\n')
    if gatekeeper_version is not None:
        (bindir / "gatekeeper").write_text(f'#!/bin/sh\necho "gatekeeper {gatekeeper_version}"\n')
    for f in bindir.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return bindir


def _run(script: str, tmp: Path, env: dict[str, str], bindir: Path) -> proc.ProcResult:
    full = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp), **env}
    return proc.run([str(BASH), "-e", "-c", script], cwd=tmp, env=full, timeout=60)


def _calls(tmp: Path) -> list[str]:
    path = tmp / "python.calls"
    return path.read_text().splitlines() if path.exists() else []


# ---------------------------------------------------------------- the version


def test_the_stamped_version_is_the_package_version() -> None:
    spec, _ = split_component(TEMPLATE)
    assert spec["version"]["default"] == __version__, "stamp ci-templates/gatekeeper.yml: input version"
    catalog_spec, _ = split_component(CATALOG)
    assert catalog_spec["version"]["default"] == __version__


def test_every_job_pins_the_version() -> None:
    jobs = render(_include(), ROOT)
    pinned = render(_include(version="1.2.3"), ROOT)
    for name, job in jobs.items():
        assert job["variables"]["GATEKEEPER_VERSION"] == __version__, name
        assert pinned[name]["variables"]["GATEKEEPER_VERSION"] == "1.2.3", name
        assert any("gatekeeper --version" in line for line in job["before_script"]), name


def test_the_image_can_be_pinned_by_the_version_variable() -> None:
    jobs = render(_include(version="1.2.3", image="$CI_REGISTRY/platform/gatekeeper/cpu:$GATEKEEPER_VERSION"), ROOT)
    for name, job in jobs.items():
        assert job["image"] == "$CI_REGISTRY/platform/gatekeeper/cpu:$GATEKEEPER_VERSION", name
        assert job["variables"]["GATEKEEPER_VERSION"] == "1.2.3"


@pytest.mark.parametrize(
    ("found", "wanted", "ok"),
    [(__version__, __version__, True), ("9.9.9", __version__, False), (None, __version__, False)],
    ids=["same", "other-version", "not-installed"],
)
def test_a_job_refuses_another_gatekeeper_version(tmp_path: Path, found: str | None, wanted: str, ok: bool) -> None:
    job = render(_include(install=""), ROOT)["gatekeeper:verify_hip"]
    script = _snippet(job, "before_script", "gatekeeper --version")
    res = _run(script, tmp_path, {"GATEKEEPER_VERSION": wanted}, _fake_bin(tmp_path, found))
    assert (res.returncode == 0) is ok, res.stderr
    if not ok:
        assert res.returncode == 2
        assert f"runs gatekeeper {wanted}" in res.stderr


@pytest.mark.parametrize(
    ("component", "ok"),
    [
        ("", True),  # included by branch or SHA on GitLab: no version
        ("e93f09337be80be9babb42e057cc5da21bb30dfc", True),  # gitlab-ci-local: the SHA
        (__version__, True),
        ("1.2.3", False),  # the catalog's 1.2.3 asked to run another gatekeeper
    ],
)
def test_the_component_version_wins_over_a_version_input(tmp_path: Path, component: str, ok: bool) -> None:
    job = render(_include(install=""), ROOT)["gatekeeper:gate"]
    script = _snippet(job, "before_script", "GATEKEEPER_COMPONENT_VERSION")
    env = {"GATEKEEPER_VERSION": __version__, "GATEKEEPER_COMPONENT_VERSION": component}
    res = _run(script, tmp_path, env, _fake_bin(tmp_path, __version__))
    assert (res.returncode == 0) is ok, res.stderr
    if not ok:
        assert "only runs gatekeeper 1.2.3" in res.stderr


def test_registry_install_is_pinned_and_never_from_a_public_index(tmp_path: Path) -> None:
    job = render(_include(), ROOT)["gatekeeper:functional_test"]
    assert job["variables"]["GATEKEEPER_INSTALL"] == "registry"
    script = _snippet(job, "before_script", "GATEKEEPER_INSTALL")
    env = {
        "GATEKEEPER_INSTALL": "registry",
        "GATEKEEPER_VERSION": "1.4.0",
        "GATEKEEPER_PROJECT": "platform/gatekeeper",
        "CI_API_V4_URL": "https://gitlab.example.com/api/v4",
        "CI_JOB_TOKEN": "jobtoken123",
    }
    res = _run(script, tmp_path, env, _fake_bin(tmp_path, None))
    assert res.returncode == 0, res.stderr
    first, second = _calls(tmp_path)
    index = "https://gitlab-ci-token:jobtoken123@gitlab.example.com/api/v4/projects/platform%2Fgatekeeper/packages/pypi/simple"
    assert first == f"-m pip install --quiet --no-deps --index-url {index} gatekeeper-rocm==1.4.0"
    # dependencies only: gatekeeper-rocm==1.4.0 is already installed and satisfies the pin
    assert second.endswith(" gatekeeper-rocm[onnx,postgres]==1.4.0")
    assert "--index-url" not in second.replace("--extra-index-url https://download.pytorch.org/whl/cpu", "")


def test_other_install_values(tmp_path: Path) -> None:
    job = render(_include(), ROOT)["gatekeeper:gate"]
    script = _snippet(job, "before_script", "GATEKEEPER_INSTALL")
    res = _run(script, tmp_path, {"GATEKEEPER_INSTALL": ""}, _fake_bin(tmp_path, None))
    assert res.returncode == 0
    assert _calls(tmp_path) == [], "empty install: gatekeeper is in the image"
    res = _run(script, tmp_path, {"GATEKEEPER_INSTALL": "-e ."}, tmp_path / "bin")
    assert _calls(tmp_path) == ["-m pip install --quiet -e ."]


# ---------------------------------------------------------------- per-stage arguments


def test_per_stage_args_reach_only_their_stage() -> None:
    given = {f"{s}_args": f"--only-{s}" for s in STAGES}
    jobs = render(_include(stage_args="--seed 1", **given), ROOT)
    for stage in STAGES:
        job = jobs[f"gatekeeper:{stage}"]
        assert job["variables"]["GATEKEEPER_STAGE_ARGS"] == f"--only-{stage}"
        command = _snippet(job, "script", 'gatekeeper stage "$GATEKEEPER_STAGE"')
        assert "--seed 1 $GATEKEEPER_STAGE_ARGS" in command
    for name in ("gatekeeper:gate", "gatekeeper:report", "gatekeeper:diagnose", "gatekeeper:breaker-reset"):
        assert "GATEKEEPER_STAGE_ARGS" not in jobs[name]["variables"], name


def _stage_call(job: dict[str, Any], tmp: Path, channel: str = "stable") -> tuple[list[str], dict[str, str], str]:
    """Run the stage job's rounds step and stage command in bash with a fake ``gatekeeper``: (its argv, the
    GATEKEEPER_BASELINE_* variables it saw, what the job printed)."""
    bindir = tmp / "bin"
    bindir.mkdir()
    fake = bindir / "gatekeeper"
    fake.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp}/argv"\nenv | grep "^GATEKEEPER_BASELINE_" > "{tmp}/env"\n'
    )
    fake.chmod(0o755)
    rounds = _snippet(job, "script", '[ -n "${GATEKEEPER_ROUNDS_BASELINE:-}" ]')
    command = _snippet(job, "script", 'gatekeeper stage "$GATEKEEPER_STAGE"')
    env = {k: str(v) for k, v in job["variables"].items()} | {"CHANNEL": channel}
    res = _run(f"soak=''\nrc=0\n{rounds}\n{command}\n", tmp, env, bindir)
    assert res.returncode == 0, res.stderr
    seen = dict(line.split("=", 1) for line in (tmp / "env").read_text().splitlines())
    return (tmp / "argv").read_text().splitlines(), seen, res.stdout


@pytest.mark.parametrize("baseline", ["gitlab:", "postgresql://gatekeeper@db.example.com/gatekeeper"])
def test_performance_baseline_samples_in_rounds_against_the_gate_jobs_baseline(tmp_path: Path, baseline: str) -> None:
    jobs = render(_include(baseline=baseline, max_processes=12, performance_baseline_args="--processes 4"), ROOT)
    job = jobs["gatekeeper:performance_baseline"]
    assert job["variables"]["GATEKEEPER_ROUNDS_BASELINE"] == jobs["gatekeeper:gate"]["variables"]["GATEKEEPER_BASELINE"]
    argv, seen, said = _stage_call(job, tmp_path, "nightly")
    head = ["stage", "performance_baseline", "--device", "auto", "--out", "artifacts/nightly", "--channel", "nightly"]
    # the stage's own arguments come last, so a --max-processes there wins (argparse: the last one)
    assert argv == [*head, "--baseline", baseline, "--max-processes", "12", "--processes", "4"]
    # a gitlab: store reads this channel's performance_baseline job, where the gate job reads all four stages
    assert seen == {
        "GATEKEEPER_BASELINE_ARTIFACTS": "artifacts/nightly",
        "GATEKEEPER_BASELINE_JOBS": "gatekeeper:performance_baseline: [nightly]",
    }
    assert f"samples in rounds against {baseline}, at most 12 processes" in said
    for stage in ("verify_hip", "functional_test", "compatibility_check"):
        assert "GATEKEEPER_ROUNDS_BASELINE" not in jobs[f"gatekeeper:{stage}"]["variables"], stage
    assert render(_include(), ROOT)["gatekeeper:performance_baseline"]["variables"]["GATEKEEPER_MAX_PROCESSES"] == "20"


def test_without_a_baseline_performance_baseline_runs_its_fixed_processes(tmp_path: Path) -> None:
    job = render(_include(baseline="", performance_baseline_args="--processes 4"), ROOT)[
        "gatekeeper:performance_baseline"
    ]
    argv, seen, said = _stage_call(job, tmp_path)
    assert argv[-2:] == ["--processes", "4"]
    assert "--baseline" not in argv
    assert "--max-processes" not in argv
    assert seen == {}
    assert "rounds" not in said


# ---------------------------------------------------------------- the nightly wheel


def test_nightly_wheel_is_downloaded_once_a_day(tmp_path: Path) -> None:
    job = render(_include(), ROOT)["gatekeeper:verify_hip"]
    script = _snippet(job, "script", 'if [ "$CHANNEL" = nightly ]')
    index = "https://download.pytorch.org/whl/nightly/rocm6.2"
    wheels = tmp_path / ".gatekeeper-wheels" / "https___download.pytorch.org_whl_nightly_rocm6.2"
    wheels.mkdir(parents=True)
    old = wheels / "torch-2.9.0.dev20261201-cp311-cp311-linux_x86_64.whl"
    today = wheels / "torch-2.9.0.dev20261203-cp311-cp311-linux_x86_64.whl"
    old.write_text("x")
    today.write_text("x")
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    res = _run(script, tmp_path, {"CHANNEL": "nightly"}, _fake_bin(tmp_path, None))
    assert res.returncode == 0, res.stderr
    assert not old.exists(), "yesterday's wheels are dropped"
    assert today.exists(), "today's wheel is reused"
    download, install = _calls(tmp_path)
    rel = ".gatekeeper-wheels/https___download.pytorch.org_whl_nightly_rocm6.2"
    assert download == f"-m pip download --quiet --pre torch --index-url {index} --dest {rel}"
    assert install == f"-m pip install --quiet --pre --upgrade --no-index --find-links {rel} torch"
    res = _run(script, tmp_path, {"CHANNEL": "stable"}, tmp_path / "bin")
    assert len(_calls(tmp_path)) == 2, "the stable channel installs nothing"


def test_rocm_code_object_cache_is_set() -> None:
    from gatekeeper.kernel_cache.key import CACHE_VARIABLES

    assert "AMD_COMGR_CACHE_DIR" in CACHE_VARIABLES


# ---------------------------------------------------------------- report and breaker reset


def test_report_job() -> None:
    job = render(_include(), ROOT)["gatekeeper:report"]
    assert job["rules"] == [{"when": "always"}]
    assert job["needs"] == [{"job": "gatekeeper:gate", "optional": True}]
    assert job["artifacts"]["expose_as"] == "gatekeeper report"
    assert job["artifacts"]["paths"] == ["gatekeeper-report/"]
    assert job["artifacts"]["when"] == "always"
    script = "\n".join(job["script"])
    assert 'gatekeeper report --artifacts "$dir" ${GATEKEEPER_BASELINE:+--history "$GATEKEEPER_BASELINE"}' in script
    assert "report-url.txt" in script


def test_breaker_reset_job_is_manual_and_opens_the_stage_cache() -> None:
    jobs = render(_include(breaker_reset_channel="stable", breaker_reset_job="verify_hip"), ROOT)
    job = jobs["gatekeeper:breaker-reset"]
    assert job["rules"][-1] == {"when": "manual", "allow_failure": True}
    assert job["needs"] == []
    assert job["variables"]["CHANNEL"] == "stable"
    assert job["variables"]["GATEKEEPER_STAGE"] == "verify_hip"
    # the same cache key text: with these variables it names the stage job's cache
    assert job["cache"][0]["key"] == jobs["gatekeeper:verify_hip"]["cache"][0]["key"]
    assert job["cache"][0]["paths"] == [".gatekeeper-cache/"]
    assert any("gatekeeper breaker reset" in line for line in job["script"])


# ---------------------------------------------------------------- the catalog copy


@pytest.mark.parametrize("component_version", ["", "e93f09337be80be9babb42e057cc5da21bb30dfc", __version__])
def test_catalog_copy_renders_with_a_component_context(component_version: str) -> None:
    include = {
        "local": "templates/gatekeeper.yml",
        "component_context": {"name": "gatekeeper", "sha": "e93f0933", "version": component_version},
    }
    jobs = render({"include": [include]}, ROOT)
    validate(jobs)
    for name, job in jobs.items():
        assert job["variables"]["GATEKEEPER_COMPONENT_VERSION"] == component_version, name


def test_catalog_copy_needs_a_component_context() -> None:
    with pytest.raises(AssertionError, match="component context"):
        render({"include": [{"local": "templates/gatekeeper.yml"}]}, ROOT)


def test_sync_catalog_refuses_a_source_it_cannot_transform(tmp_path: Path) -> None:
    from scripts.sync_catalog import CatalogError, catalog_text

    with pytest.raises(CatalogError, match="exactly once"):
        catalog_text(TEMPLATE.read_text().replace('GATEKEEPER_COMPONENT_VERSION: ""', "X: 1"))
    assert yaml.safe_load(catalog_text(TEMPLATE.read_text()).partition("\n---\n")[0])["spec"]["component"]
