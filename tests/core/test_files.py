from __future__ import annotations

import json
import os

import pytest

from gatekeeper.core import files
from gatekeeper.core.errors import InputError


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "out.json"
    files.atomic_write(target, "one")
    files.atomic_write(target, b"two")
    assert target.read_text() == "two"
    assert os.listdir(target.parent) == ["out.json"]


def test_atomic_write_keeps_old_file_when_writing_fails(tmp_path, monkeypatch):
    target = tmp_path / "verdict.json"
    target.write_text("old")

    def boom(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        files.atomic_write(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["verdict.json"]


def test_read_json_truncated_names_line_and_hint(tmp_path):
    path = tmp_path / "stage.json"
    path.write_text('{\n  "a": [1, 2,\n')
    with pytest.raises(InputError) as err:
        files.read_json(path)
    line = err.value.line()
    assert line.startswith(f"{path}:3:")
    assert "truncated" in line


def test_read_json_missing_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        files.read_json(tmp_path / "nope.json")


def test_read_yaml_syntax_error_has_position(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("version: 1\ngates:\n  a: [1, 2\n")
    with pytest.raises(InputError) as err:
        files.read_yaml(path)
    assert err.value.where.split(":")[0] in ("3", "4")
    assert "invalid YAML" in err.value.line()


def test_yaml_positions_follow_key_paths(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("version: 1\ngates:\n  cov:\n    metric: x.y\n    pass: '>= 1'\n")
    doc = files.read_yaml(path)
    assert doc.position(["gates", "cov", "pass"]) == "5:11"
    assert doc.key_position(["gates", "cov", "pass"]) == "5:5"
    assert doc.position(["gates", "missing"]) == "3:3"


def test_write_json_roundtrip(tmp_path):
    files.write_json(tmp_path / "a.json", {"x": [1, 2]})
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": [1, 2]}


def test_read_yaml_impossible_date_names_the_place(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("waivers:\n  - expires: 2025-13-01\n")
    with pytest.raises(InputError) as err:
        files.read_yaml(path)
    assert err.value.line().startswith(f"{path}:2:14: invalid value '2025-13-01'")


def test_atomic_write_gives_the_usual_file_mode(tmp_path):
    old = os.umask(0o022)
    try:
        files.atomic_write(tmp_path / "report.html", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "report.html").stat().st_mode & 0o777 == 0o644
