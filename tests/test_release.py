"""Releases: the tag pipeline's jobs, the version agreement it enforces, and the wheel
``make dist`` builds (contents, a fresh ``--no-deps`` install, ``gatekeeper --version``)."""

from __future__ import annotations

import shutil
import sys
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from gatekeeper import __version__
from gatekeeper.core import proc
from scripts import release_check
from tests.support.source_tree import source_tree
from tests.test_ci_templates import ROOT, _Loader, render, validate

# ---------------------------------------------------------------- the tag pipeline


@pytest.fixture(scope="module")
def own() -> dict[str, Any]:
    pipeline = yaml.load((ROOT / ".gitlab-ci.yml").read_text(), Loader=_Loader)
    rendered = render(pipeline, ROOT)
    validate(rendered)
    return rendered


def test_release_jobs_run_on_tags_only(own: dict[str, Any]) -> None:
    for name in ("release:dist", "release:image-cpu", "release:image-rocm", "release:publish"):
        assert own[name]["rules"] == [{"if": "$CI_COMMIT_TAG"}], name
    for name in ("lint", "tests"):
        assert "rules" not in own[name]


def test_dist_job_checks_builds_and_publishes_to_the_project_registry(own: dict[str, Any]) -> None:
    job = own["release:dist"]
    script = job["script"]
    check = script.index('python scripts/release_check.py --tag "$CI_COMMIT_TAG"')
    build = script.index("python -m build --outdir dist .")
    upload = next(i for i, line in enumerate(script) if "twine upload" in line)
    assert check < build < upload, "nothing is built before the versions agree"
    assert '--repository-url "$CI_API_V4_URL/projects/$CI_PROJECT_ID/packages/pypi"' in script[upload]
    assert job["variables"] == {"TWINE_USERNAME": "gitlab-ci-token", "TWINE_PASSWORD": "$CI_JOB_TOKEN"}
    assert job["artifacts"]["paths"] == ["dist/"]


def test_image_jobs_build_from_the_wheel_and_push_to_the_project_registry(own: dict[str, Any]) -> None:
    for kind in ("cpu", "rocm"):
        job = own[f"release:image-{kind}"]
        assert job["needs"] == ["release:dist"]
        assert job["script"] == [f'sh scripts/build_image.sh {kind} "$CI_REGISTRY_IMAGE" --push']
        assert "docker login" in job["before_script"][0]
        assert (ROOT / "docker" / f"{kind}.Dockerfile").is_file()
    assert own["release:image-rocm"]["variables"]["ROCM_BASE_IMAGE"].startswith("rocm/pytorch:")


def test_publish_job_creates_the_release(own: dict[str, Any]) -> None:
    job = own["release:publish"]
    assert job["release"]["tag_name"] == "$CI_COMMIT_TAG"
    assert set(job["needs"]) == {"release:dist", "release:image-cpu", "release:image-rocm"}
    assert job["stage"] == "release"


# ---------------------------------------------------------------- versions agree


def _copy_project(tmp: Path) -> Path:
    for rel in ("gatekeeper/__init__.py", "ci-templates/gatekeeper.yml", "templates/gatekeeper.yml"):
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp / rel)
    return tmp


def test_release_check_accepts_the_package_version() -> None:
    assert release_check.problems(__version__) == []
    assert release_check.main(["--tag", __version__]) == 0


@pytest.mark.parametrize("tag", ["v" + __version__, "9.9.9", "latest"])
def test_release_check_refuses_another_tag(tag: str) -> None:
    found = release_check.problems(tag)
    assert any(f"not the package version {__version__}" in p for p in found)
    assert release_check.main(["--tag", tag]) == 1


def test_release_check_refuses_an_unstamped_component(tmp_path: Path) -> None:
    root = _copy_project(tmp_path)
    src = root / "ci-templates" / "gatekeeper.yml"
    src.write_text(src.read_text().replace(f'default: "{__version__}"', 'default: "0.0.1"', 1))
    found = release_check.problems(__version__, root)
    assert any("defaults to 0.0.1" in p for p in found)
    assert any("templates/gatekeeper.yml is stale" in p for p in found)


def test_release_check_refuses_a_stale_catalog(tmp_path: Path) -> None:
    root = _copy_project(tmp_path)
    (root / "templates" / "gatekeeper.yml").write_text((root / "ci-templates" / "gatekeeper.yml").read_text())
    assert release_check.problems(__version__, root) == [
        "templates/gatekeeper.yml is stale: run python scripts/sync_catalog.py"
    ]


# ---------------------------------------------------------------- make image without a container tool


def test_image_build_skips_clearly_without_docker_or_podman(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("sed", "timeout"):
        found = shutil.which(tool)
        assert found
        (bindir / tool).symlink_to(found)
    res = proc.run(["/bin/sh", ROOT / "scripts" / "build_image.sh", "cpu", "gk"], env={"PATH": str(bindir)}, timeout=60)
    assert res.returncode == 0
    assert "skipped: no docker/podman" in res.stdout
    bad = proc.run(["/bin/sh", ROOT / "scripts" / "build_image.sh", "gpu", "gk"], timeout=60)
    assert bad.returncode == 2
    assert "usage" in bad.stderr


# ---------------------------------------------------------------- the wheel


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` once for this module (without isolation: the venv has setuptools)."""
    out = tmp_path_factory.mktemp("dist")
    tree = source_tree(tmp_path_factory.mktemp("source"))  # build/ and *.egg-info land there, not in the checkout
    res = proc.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, tree], timeout=600)
    assert res.ok, res.describe()
    return out


@pytest.mark.slow
def test_wheel_and_sdist_are_built_with_the_package_version(dist: Path) -> None:
    names = sorted(p.name for p in dist.iterdir())
    assert names == [f"gatekeeper_rocm-{__version__}-py3-none-any.whl", f"gatekeeper_rocm-{__version__}.tar.gz"]


@pytest.mark.slow
def test_wheel_carries_schemas_default_gates_and_data(dist: Path) -> None:
    wheel = next(dist.glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry = zf.read(f"gatekeeper_rocm-{__version__}.dist-info/entry_points.txt").decode()
    # every data file of the package: the JSON schemas, the default gates, the known issues
    data = {
        p.relative_to(ROOT).as_posix()
        for pattern in ("*.json", "*.yaml", "*.yml")
        for p in (ROOT / "gatekeeper").rglob(pattern)
    }
    assert len([d for d in data if d.endswith(".json")]) >= 5, "the repository has its schemas"
    assert "gatekeeper/evaluate/default_gates.yaml" in data, "the built-in default gates"
    assert "gatekeeper/analyze/known_issues.yaml" in data
    assert data <= names, f"data missing from the wheel: {sorted(data - names)}"
    assert "stages/verify_hip.py" in names
    assert "gatekeeper = gatekeeper.cli:main" in entry
    assert not any(n.startswith("tests/") for n in names)


@pytest.mark.slow
def test_wheel_installs_in_a_fresh_venv_without_deps(dist: Path, tmp_path: Path) -> None:
    wheel = next(dist.glob("*.whl"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    res = proc.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", wheel], timeout=300)
    assert res.ok, res.describe()
    version = proc.run([env_dir / "bin" / "gatekeeper", "--version"], timeout=120, cwd=tmp_path)
    assert version.ok, version.describe()
    assert version.stdout.strip() == f"gatekeeper {__version__}"
    # and it is the release's tag: the release check accepts exactly this version
    assert release_check.problems(version.stdout.split()[-1]) == []
