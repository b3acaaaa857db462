"""Every reader has a budget: YAML aliases, file sizes, archive members, file types, timestamps."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.core.errors import InputError
from tests.support import builders

REPO = Path(__file__).resolve().parents[2]


def _gatekeeper(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """In a child: a reader without a budget would hang or eat the machine, not this test process."""
    return subprocess.run(
        [sys.executable, "-m", "gatekeeper", *args], check=False, cwd=REPO, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def _artifacts(tmp_path: Path) -> Path:
    from gatekeeper.contract.stage_report import write_stage

    art = tmp_path / "art"
    write_stage(builders.report("functional_test", {"op_pass_rate": 1.0}), art)
    return art


BOMB = (
    "version: 1\n"
    + "".join(f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n" for i in range(10))
    + "gates: *x9\n"
)


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    gates = tmp_path / "gates.yaml"
    gates.write_text(BOMB)
    assert len(BOMB) < 800
    run = _gatekeeper("evaluate", "--artifacts", str(_artifacts(tmp_path)), "--gates", str(gates),
                      "--out", str(tmp_path / "out"), timeout=30)  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "alias" in run.stderr
    assert run.stderr.count("\n") == 1


def test_ordinary_anchors_still_work(tmp_path):
    from gatekeeper.core.files import read_yaml

    path = tmp_path / "a.yaml"
    path.write_text("base: &b {fail: '>= 95%'}\ngates:\n  - {<<: *b, name: a}\n  - {<<: *b, name: b}\n")
    assert read_yaml(path).data["gates"][1]["fail"] == ">= 95%"


def test_a_file_over_its_size_cap_is_refused(tmp_path, capsys):
    gates = tmp_path / "gates.yaml"
    gates.write_text("version: 1\n" + "#" * 100 + "\n" * (5 * 2**20 // 1))
    code = main(["evaluate", "--artifacts", str(_artifacts(tmp_path)), "--gates", str(gates), "--out", str(tmp_path)])
    assert code == 2
    assert "larger than" in capsys.readouterr().err


def test_a_json_artifact_over_its_cap_is_refused(tmp_path, monkeypatch, capsys):
    from gatekeeper.core import budgets

    monkeypatch.setattr(budgets, "MAX_JSON_BYTES", 200)
    art = _artifacts(tmp_path)
    code = main(
        ["evaluate", "--artifacts", str(art), "--gates", str(REPO / "gates.yaml"), "--out", str(tmp_path / "o")]
    )
    assert code == 2
    assert "functional_test.json" in capsys.readouterr().err


def test_a_small_file_is_read_without_a_buffer_the_size_of_the_cap(tmp_path):
    import tracemalloc

    from gatekeeper.core.budgets import read_capped

    path = tmp_path / "small.json"
    path.write_bytes(b"{}" * 500)
    tracemalloc.start()
    try:
        assert read_capped(path, max_bytes=256 * 2**20) == b"{}" * 500
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20  # read(cap + 1) asks for 256 MiB here


@pytest.mark.parametrize("size", [0, 99, 100, 101, 5000])
def test_the_cap_holds_at_its_edge(tmp_path, size):
    from gatekeeper.core.budgets import read_capped

    path = tmp_path / "f"
    path.write_bytes(b"x" * size)
    if size <= 100:
        assert read_capped(path, max_bytes=100) == b"x" * size
    else:
        with pytest.raises(InputError, match="larger than"):
            read_capped(path, max_bytes=100)


def test_a_file_that_grows_after_its_size_was_taken_is_still_capped(tmp_path, monkeypatch):
    from gatekeeper.core import budgets

    path = tmp_path / "growing"
    path.write_bytes(b"x" * 10)
    real_fstat = os.fstat

    def fstat_then_grow(fd):
        result = real_fstat(fd)
        path.write_bytes(b"x" * 3000)  # what a writer appends between the fstat and the read
        return result

    monkeypatch.setattr(budgets.os, "fstat", fstat_then_grow)
    with pytest.raises(InputError, match="larger than"):
        budgets.read_capped(path, max_bytes=2000)


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink loop", "dangling symlink"])
def test_only_regular_files_are_read(tmp_path, kind):
    art = _artifacts(tmp_path)
    bad = art / "zz_hostile.json"
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "directory":
        bad.mkdir()
    elif kind == "symlink loop":
        bad.symlink_to(bad.name)
    else:
        bad.symlink_to("nowhere.json")
    run = _gatekeeper("evaluate", "--artifacts", str(art), "--gates", str(REPO / "gates.yaml"),
                      "--out", str(tmp_path / "out"), timeout=30)  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "zz_hostile.json" in run.stderr
    assert "internal error" not in run.stderr


@pytest.mark.parametrize("kind", ["unknown encoding", "directory", "fifo"])
def test_junit_readers_refuse_what_is_not_a_junit_file(tmp_path, kind):
    from gatekeeper.contract.junit import summarize

    path = tmp_path / "report.xml"
    if kind == "unknown encoding":
        path.write_bytes(b'<?xml version="1.0" encoding="x-hostile"?><testsuite/>')
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    with pytest.raises(InputError, match=r"report\.xml"):
        summarize([path])


def _zip_bomb(member_bytes: int) -> bytes:
    buf = io.BytesIO()
    with (
        zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf,
        zf.open("artifacts/functional_test.json", "w") as fh,
    ):
        for _ in range(member_bytes // 2**20):
            fh.write(b" " * 2**20)
    return buf.getvalue()


def test_an_archive_member_is_size_checked_before_it_is_inflated(monkeypatch):
    from gatekeeper.history import gitlab as store_mod

    data = _zip_bomb(300 * 2**20)
    assert len(data) < 2 * 2**20

    store = store_mod.GitLabStore("http://gitlab.invalid/api/v4", "1", "main", None)
    monkeypatch.setattr(store, "_get", lambda path, params=None: None if path.endswith(".json") else data)
    inflated: list[int] = []
    real_read = zipfile.ZipFile.read
    monkeypatch.setattr(
        zipfile.ZipFile, "read", lambda self, name, pwd=None: inflated.append(1) or real_read(self, name)
    )
    assert store._from_job({"id": 1, "artifacts_file": {"size": len(data)}}, "functional_test") is None
    assert not inflated
    assert "too large" in store.why_missing


def test_a_naive_timestamp_in_breaker_state_is_input_error_not_a_crash(tmp_path, capsys):
    state = tmp_path / "state"
    state.mkdir()
    (state / "nightly--perf.json").write_text(json.dumps({
        "schema": "gatekeeper.breaker/v1", "channel": "nightly", "job": "perf", "state": "open",
        "consecutive_failures": 3, "opened_at": "2026-12-01T10:00:00", "history": []}))  # fmt: skip
    code = main(["breaker", "check", "--channel", "nightly", "--job", "perf", "--state", str(state)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "nightly--perf.json" in err
    assert "opened_at" in err


def test_breaker_job_name_cannot_write_outside_the_artifacts(tmp_path):
    art = tmp_path / "deep" / "art"
    art.mkdir(parents=True)
    state = tmp_path / "state"
    job = "../../escaped"
    for _ in range(3):
        assert main(["breaker", "record", "--channel", "nightly", "--job", job, "--result", "fail",
                     "--state", str(state)]) == 0  # fmt: skip
    assert main(["breaker", "check", "--channel", "nightly", "--job", job, "--state", str(state),
                 "--artifacts", str(art)]) == 4  # fmt: skip
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert all(p.is_relative_to(art) or p.is_relative_to(state) for p in written), written
    assert list(art.glob("*.breaker.json"))
