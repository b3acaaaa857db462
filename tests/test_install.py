"""Installing gatekeeper where torch already is (a ROCm or CUDA image) must leave that torch alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import tomllib

from tests.conftest import REPO
from tests.support.source_tree import source_tree


def test_torch_is_a_floor_never_a_pin():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = [d for d in deps if re.match(r"torch\b", d)]
    assert torch == ["torch>=2.1"]
    assert not any("torchvision" in d for d in deps)


@pytest.mark.slow
def test_install_into_env_with_torch_keeps_torch(tmp_path):
    import torch

    report = tmp_path / "report.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--quiet",
            "--no-build-isolation",
            "--report",
            str(report),
            str(source_tree(tmp_path / "source")),  # pip writes *.egg-info into what it builds: a copy
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    planned = {
        i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]
    }
    assert "torch" not in planned, f"pip would replace torch {torch.__version__} with {planned.get('torch')}"
    assert "gatekeeper-rocm" in planned
