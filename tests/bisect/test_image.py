"""image provider: the commands it renders for docker/podman, the tag range, and the clear errors without an engine.

On this machine docker is a client without an engine, so the runs are checked as rendered argv; a
bisection over real images runs where an engine answers (skipped here, with the reason).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from gatekeeper import cli
from gatekeeper.bisect.providers.base import OUT, Candidate
from gatekeeper.bisect.providers.image import ImageProvider, inspect_facts, version_key
from gatekeeper.core.errors import InputError
from tests.conftest import hardware_skip


def _provider(tmp_path: Path, **kw) -> ImageProvider:
    tags = tmp_path / "tags.txt"
    tags.write_text("# oldest first\nrocm6.2-20250301\nrocm6.2-20250302\n\nrocm6.2-20250310\nrocm6.2-20250311\n")
    return ImageProvider(image="registry.example.com/ml/rocm", tags_file=str(tags), workdir=tmp_path, **kw)


def test_tags_file_gives_the_range_in_its_order(tmp_path):
    p = _provider(tmp_path)
    cands = p.candidates("rocm6.2-20250302", "registry.example.com/ml/rocm:rocm6.2-20250311")
    assert [c.label for c in cands] == ["rocm6.2-20250302", "rocm6.2-20250310", "rocm6.2-20250311"]
    assert cands[0].ref == "registry.example.com/ml/rocm:rocm6.2-20250302"
    with pytest.raises(InputError, match="is not older than --bad"):
        p.candidates("rocm6.2-20250311", "rocm6.2-20250301")
    with pytest.raises(InputError, match="the range is empty"):
        p.candidates("rocm6.2-20250301", "rocm6.2-20250301")
    with pytest.raises(InputError, match="is not in --tags-file"):
        p.candidates("rocm6.2-20240101", "rocm6.2-20250301")
    with pytest.raises(InputError, match="is not a tag of --image"):
        p.candidates("other/repo:rocm6.2-20250301", "rocm6.2-20250311")
    with pytest.raises(InputError, match="is not an image tag"):
        p.candidates("x;rm -rf /", "rocm6.2-20250311")
    assert sorted(["v2.10", "v2.9", "v2.1"], key=version_key) == ["v2.1", "v2.9", "v2.10"]


def test_rendered_stage_and_command_runs(tmp_path):
    p = _provider(tmp_path, engine="docker", gpu="rocm")
    cand = Candidate(3, "registry.example.com/ml/rocm:rocm6.2-20250310", "rocm6.2-20250310")
    prepared = p.container(cand)
    out = tmp_path / "out" / "round1"
    stage = prepared.render(
        ["-m", "gatekeeper", "stage", "performance_baseline", "--out", OUT, "--device", "auto"], out, python=True
    )
    argv = list(stage.argv)
    assert argv[:3] == ["docker", "run", "--rm"]
    assert f"--user={os.getuid()}:{os.getgid()}" in argv
    for flag in ("--device=/dev/kfd", "--device=/dev/dri", "--group-add=video", "--group-add=render"):
        assert flag in argv
    assert f"--volume={tmp_path}:/work" in argv
    assert f"--volume={out}:/gatekeeper-out" in argv
    i = argv.index("--entrypoint")
    assert argv[i : i + 3] == ["--entrypoint", "python", cand.ref]
    assert argv[i + 3 :] == [
        "-m",
        "gatekeeper",
        "stage",
        "performance_baseline",
        "--out",
        "/gatekeeper-out",
        "--device",
        "auto",
    ]
    command = prepared.render(["sh", "-c", "pytest -x; exit $?"], out)
    assert list(command.argv[-4:]) == [cand.ref, "sh", "-c", "pytest -x; exit $?"]  # one argv item, never a shell line
    assert "--entrypoint" not in command.argv
    cuda = _provider(tmp_path, engine="podman", gpu="cuda").container(cand).render(["true"], out)
    assert cuda.argv[0] == "podman"
    assert "--gpus=all" in cuda.argv
    none = _provider(tmp_path, engine="docker", gpu="none").container(cand).render(["true"], out)
    assert not [a for a in none.argv if a.startswith(("--device", "--gpus", "--group-add"))]


def test_what_changed_between_two_images(tmp_path):
    inspect = [
        {
            "Id": "sha256:abc",
            "RepoDigests": ["registry.example.com/ml/rocm@sha256:111"],
            "Created": "2025-03-10",
            "Config": {
                "Env": ["ROCM_VERSION=6.2.1", "PATH=/usr/bin", "HF_TOKEN=secret", "MIOPEN_VERSION=3.2"],
                "Labels": {"org.opencontainers.image.version": "6.2.1"},
            },
        }
    ]
    facts = inspect_facts(json.dumps(inspect))
    assert facts["digest"] == "registry.example.com/ml/rocm@sha256:111"
    assert facts["env"] == {"ROCM_VERSION": "6.2.1", "MIOPEN_VERSION": "3.2"}  # no PATH, never a secret
    later = {**facts, "digest": "registry.example.com/ml/rocm@sha256:222", "env": {"ROCM_VERSION": "6.2.2"}}
    p = _provider(tmp_path)
    a, b = Candidate(0, "r:a", "a"), Candidate(1, "r:b", "b")
    changes = p.changes(
        a, b, {0: {**facts, "packages": {"torch": "2.5.0"}}, 1: {**later, "packages": {"torch": "2.5.1"}}}
    )
    assert changes["digests"] == {"from": facts["digest"], "to": later["digest"]}
    assert changes["env"] == {
        "MIOPEN_VERSION": {"from": "3.2", "to": None},
        "ROCM_VERSION": {"from": "6.2.1", "to": "6.2.2"},
    }
    assert changes["packages"] == {"torch": {"from": "2.5.0", "to": "2.5.1"}}


def _path_without(tmp_path: Path, *tools: str) -> str:
    """A PATH holding this machine's tools except ``tools`` (links in a directory of its own)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("git", "python3", "sh"):
        found = shutil.which(name)
        if found and name not in tools:
            (bin_dir / name).symlink_to(found)
    return str(bin_dir)


def test_no_engine_installed_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", _path_without(tmp_path, "docker", "podman"))
    argv = ["bisect", "--provider", "image", "--image", "rocm/pytorch", "--good", "a", "--bad", "b"]
    assert cli.main([*argv, "--out", str(tmp_path / "o"), "--", "true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "neither docker nor podman is installed" in err[0]
    assert "hint: install one of them" in err[0]


def test_an_engine_that_does_not_answer_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    # a client whose engine is down, as docker is on this machine: a stand-in so the test holds everywhere
    fake = tmp_path / "fakebin" / "docker"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\nexit 1\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{_path_without(tmp_path, 'docker', 'podman')}")
    argv = ["bisect", "--provider", "image", "--image", "rocm/pytorch", "--good", "a", "--bad", "b"]
    assert cli.main([*argv, "--out", str(tmp_path / "o"), "--", "true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "docker is installed but its engine does not answer: Cannot connect to the Docker daemon" in err[0]
    assert not (tmp_path / "o" / "bisect.json").exists()


def _engine() -> str | None:
    for name in ("docker", "podman"):
        if shutil.which(name):
            ok = subprocess.run([name, "info"], capture_output=True, timeout=30, check=False).returncode == 0
            if ok:
                return name
    return None


@pytest.mark.slow
@pytest.mark.skipif(
    _engine() is None, reason=hardware_skip("no docker/podman engine", "none answers `info` on this machine")
)
def test_bisects_real_local_images(tmp_path, monkeypatch):  # pragma: no cover - runs only where an engine answers
    engine = _engine()
    assert engine is not None
    base = next(
        (
            i
            for i in ("busybox:latest", "alpine:latest")
            if subprocess.run([engine, "image", "inspect", i], capture_output=True, check=False).returncode == 0
        ),
        None,
    )
    if base is None:
        pytest.skip("no local busybox or alpine image to tag (no registry is reachable here)")
    for n in range(1, 7):
        subprocess.run([engine, "tag", base, f"gatekeeper-bisect-test:v{n}"], check=True)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "check.sh").write_text('case "$GATEKEEPER_BISECT_CANDIDATE" in *v[4-6]) exit 1;; esac\nexit 0\n')
    argv = ["bisect", "--provider", "image", "--image", "gatekeeper-bisect-test", "--engine", engine, "--gpu", "none"]
    assert cli.main([*argv, "--good", "v1", "--bad", "v6", "--out", str(tmp_path / "o"), "--", "sh", "check.sh"]) == 0
    doc = json.loads((tmp_path / "o" / "bisect.json").read_text())
    assert doc["candidates"][doc["result"]["first_bad"]]["label"] == "v4"


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, "[5]", '[{"Id": "a", "Id": "b"}]', "not json", ""])
def test_inspect_output_the_strict_reader_refuses_gives_no_facts_never_a_crash(text: str) -> None:
    # the engine's answer about a candidate image: brackets 5,000 deep (RecursionError) and "[5]" were exit 70
    facts = inspect_facts(text)
    assert not facts.get("digest")
