from __future__ import annotations

import sys

import pytest

from gatekeeper.core.errors import InputError
from stages.compat import dependencies as deps

# pip's own wording (pip/_internal/commands/check.py): "{name} {version} has requirement {req}, but you have
# {dep} {version}." and "{name} {version} requires {dep}, which is not installed."
PIP_CHECK_BROKEN = """\
torchvision 0.20.1 has requirement torch==2.5.1, but you have torch 2.13.0+cpu.
onnxruntime-gpu 1.19.2 requires coloredlogs, which is not installed.
"""


def test_parse_pip_check() -> None:
    assert deps.parse_pip_check("No broken requirements found.\n") == []
    problems = deps.parse_pip_check(PIP_CHECK_BROKEN)
    assert len(problems) == 2
    assert problems[0].startswith("torchvision 0.20.1 has requirement torch==2.5.1")


def test_pip_check_runs_in_this_environment() -> None:
    problems, note = deps.pip_check(timeout=120)
    assert (problems is None) == bool(note)
    if problems is not None:
        assert all(isinstance(p, str) and p for p in problems)


def test_parse_downstream() -> None:
    assert deps.parse_downstream("") == ()
    assert deps.parse_downstream(" onnxruntime, TensorRT,onnxruntime ") == ("onnxruntime", "tensorrt")
    with pytest.raises(InputError) as err:
        deps.parse_downstream("onnx runtime")
    assert "--downstream" in err.value.line()


def test_versions_report_absent_tools_as_none() -> None:
    versions = deps.installed_versions(("torch", "gatekeeper-no-such-tool"))
    assert versions["torch"].startswith("2.")
    assert versions["gatekeeper-no-such-tool"] is None


def test_absent_downstream_tool_fails() -> None:
    status = deps.check_downstream("gatekeeper-no-such-tool", [])
    assert not status.ok
    assert "not installed" in status.message


def test_installed_downstream_tool_imports_or_is_incompatible() -> None:
    assert deps.check_downstream("onnxruntime", []).ok
    dist, version = deps.installed_version("onnxruntime")
    problem = f"{dist} {version} requires gatekeeper-missing-dep, which is not installed."
    status = deps.check_downstream("onnxruntime", [problem])
    assert not status.ok
    assert "incompatible" in status.message


def test_downstream_import_crash_is_a_failed_check(tmp_path, monkeypatch) -> None:
    # A distribution whose module aborts on import (as an ABI mismatch does) must not take the stage down.
    (tmp_path / "gk_abort_mod.py").write_text("import os\nos.abort()\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setitem(deps.TOOLS, "gk-abort", (("pytest",), "gk_abort_mod"))
    status = deps.check_downstream("gk-abort", [])
    assert not status.ok
    assert "SIGABRT" in status.message
    assert sys.modules.get("gk_abort_mod") is None


def test_nightly_guard() -> None:
    assert deps.nightly_guard("stable", ("onnxruntime", "tensorrt")) == []
    assert deps.nightly_guard("nightly", ("onnxruntime", "tensorrt", "triton")) == ["onnxruntime", "tensorrt"]
    assert deps.nightly_guard("nightly", ("triton",)) == []
