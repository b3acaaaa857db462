from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from gatekeeper.cli import cache as cache_commands
from gatekeeper.cli import main
from gatekeeper.contract.stage_report import Environment, Metric, StageReport, read_stage, write_stage
from gatekeeper.core.errors import InputError
from gatekeeper.core.paths import cache_root
from gatekeeper.kernel_cache.integrity import check_and_quarantine, sqlite_problem
from gatekeeper.kernel_cache.key import (
    CACHE_VARIABLES,
    _miopen_version,
    cache_env,
    cache_fingerprint,
    cache_key,
    export_lines,
    link_inductor_headers,
)
from gatekeeper.kernel_cache.usage import begin, collect_stats, parse_size, prune

# ---------------------------------------------------------------- root, env, key


def test_cache_env_keeps_its_contract(tmp_path: Path) -> None:
    env = cache_env(tmp_path, environ={"TRITON_CACHE_DIR": "/elsewhere"})
    assert set(env) == set(CACHE_VARIABLES)
    assert env["TRITON_CACHE_DIR"] == "/elsewhere"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path.resolve() / "inductor")
    assert env["MIOPEN_USER_DB_PATH"] == str(tmp_path.resolve() / "miopen/db")
    assert cache_root({"GATEKEEPER_CACHE_DIR": str(tmp_path)}) == tmp_path.resolve()


def test_export_lines_are_shell_safe(tmp_path: Path) -> None:
    text = export_lines({"A": "/x y/$HOME", "B": "plain"})
    out = subprocess.run(
        ["sh", "-c", text + 'printf "%s|%s" "$A" "$B"'], capture_output=True, text=True, timeout=30, check=False
    )
    assert out.stdout == "/x y/$HOME|plain"


def test_cli_env_prints_exports_and_makes_dirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # never link in the real /tmp
    assert main(["cache", "env", "--root", str(tmp_path / "c")]) == 0
    captured = capsys.readouterr()
    assert f"export GATEKEEPER_CACHE_DIR={tmp_path / 'c'}" in captured.out
    assert (tmp_path / "c" / "miopen" / "db").is_dir()
    assert not (tmp_path / "tmp").exists(), "headers are linked only on request"
    assert main(["cache", "env", "--root", str(tmp_path / "c"), "--keep-inductor-headers"]) == 0
    captured = capsys.readouterr()
    assert all(line.startswith("export ") for line in captured.out.splitlines()), "stdout is eval'd"
    assert "inductor headers kept in" in captured.err


def test_link_inductor_headers(tmp_path: Path) -> None:
    root, tmp = tmp_path / "root", str(tmp_path / "tmp")
    msg = link_inductor_headers(root, tmpdir=tmp, user="ci")
    link = tmp_path / "tmp" / "torchinductor_ci" / "precompiled_headers"
    assert link.is_symlink()
    assert link.resolve() == (root / "inductor_pch").resolve()
    assert "kept in" in msg
    assert "already" in link_inductor_headers(root, tmpdir=tmp, user="ci")
    # a dangling link from an older build directory is replaced
    other = tmp_path / "other"
    assert "kept in" in link_inductor_headers(other, tmpdir=tmp, user="ci")
    assert link.resolve() == (other / "inductor_pch").resolve()
    # a real directory there is left alone
    real = tmp_path / "tmp2" / "torchinductor_ci" / "precompiled_headers"
    real.mkdir(parents=True)
    assert "stay in" in link_inductor_headers(root, tmpdir=str(tmp_path / "tmp2"), user="ci")


FP = {
    "python": "3.11.7",
    "torch": "2.5.0+rocm6.2",
    "torch_git": "32f585d9346e316e554c8d9bf7548af9f62141fc",
    "hip": "6.2.41133",
    "cuda": None,
    "gpu_archs": ["gfx90a", "gfx942"],
    "miopen": "3.2.0",
    "machine": "x86_64",
}


def test_cache_key_is_readable_safe_and_sensitive() -> None:
    key = cache_key(FP)
    assert key.startswith("py3.11.7-torch2.5.0+rocm6.2-32f585d9-hip6.2.41133-gfx90a_gfx942-")
    assert "/" not in key
    assert " " not in key
    assert cache_key(dict(FP)) == key
    for field, value in [("miopen", "3.3.0"), ("torch_git", "0" * 40), ("gpu_archs", ["gfx942"]), ("python", "3.12")]:
        assert cache_key({**FP, field: value}) != key, field


@pytest.mark.slow
def test_fingerprint_here_needs_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    fp = cache_fingerprint({"GATEKEEPER_GPU_ARCH": "gfx942;gfx90a"})
    assert fp["torch"] == torch.__version__
    assert fp["gpu_archs"] == ["gfx90a", "gfx942"]
    assert fp["torch_git"] == torch.version.git_version


def test_miopen_version_from_header(tmp_path: Path) -> None:
    header = tmp_path / "include" / "miopen" / "version.h"
    header.parent.mkdir(parents=True)
    header.write_text(
        "#define MIOPEN_VERSION_MAJOR 3\n#define MIOPEN_VERSION_MINOR 2\n#define MIOPEN_VERSION_PATCH 0\n"
    )
    assert _miopen_version(tmp_path) == "3.2.0"
    assert _miopen_version(tmp_path / "none") is None
    # $ROCM_PATH is the job's: a FIFO where the header belongs (a read would wait forever) or a header of 2 MiB
    # is no version, never a hang or a 2 MiB read
    header.unlink()
    os.mkfifo(header)
    assert _miopen_version(tmp_path) is None
    header.unlink()
    header.write_text("#define MIOPEN_VERSION_MAJOR 3\n" + "x" * (2 << 20))
    assert _miopen_version(tmp_path) is None


# ---------------------------------------------------------------- stats and prune


def _write(path: Path, size: int, age_s: float = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    if age_s:
        t = path.stat().st_mtime - age_s
        os.utime(path, (t, t))
    return path


def test_stats_count_used_and_created(tmp_path: Path) -> None:
    old = _write(tmp_path / "inductor" / "ab" / "kernel.py", 100, age_s=3600)
    _write(tmp_path / "triton" / "unused.bin", 50, age_s=3600)
    snap = begin(tmp_path)
    assert len(snap["files"]) == 2
    old.read_bytes()  # the compiler reads a cached kernel
    _write(tmp_path / "inductor" / "cd" / "new.py", 10)  # and writes a new one
    stats = collect_stats(tmp_path)
    assert stats.total_files == 3
    assert stats.total_bytes == 160
    assert stats.by_kind["inductor"] == {"bytes": 110, "files": 2}
    assert stats.created == 1
    if snap["atime"]:
        assert stats.used == 1
    else:
        assert stats.used is None
        assert "access times" in (stats.used_unknown_reason or "")


def test_stats_without_snapshot_say_so(tmp_path: Path) -> None:
    _write(tmp_path / "inductor" / "a", 5)
    stats = collect_stats(tmp_path)
    assert stats.used is None
    assert stats.created is None
    assert "no snapshot" in (stats.used_unknown_reason or "")


def test_prune_drops_least_recently_used_and_keeps_breaker_state(tmp_path: Path) -> None:
    oldest = _write(tmp_path / "inductor" / "old" / "k", 400, age_s=3000)
    middle = _write(tmp_path / "triton" / "mid", 400, age_s=2000)
    newest = _write(tmp_path / "inductor" / "new", 400, age_s=10)
    state = _write(tmp_path / "breaker" / "nightly--gate.json", 10_000, age_s=9000)
    result = prune(tmp_path, 900)
    assert result.removed_files == 1
    assert result.after_bytes == 800
    assert not oldest.exists()
    assert not oldest.parent.exists(), "emptied directories are removed"
    assert middle.exists()
    assert newest.exists()
    assert state.exists()
    assert prune(tmp_path, 0).after_bytes == 0
    assert state.exists()


@pytest.mark.parametrize(
    ("text", "n"), [("500M", 500 * 2**20), ("2G", 2 * 2**30), ("1.5GiB", int(1.5 * 2**30)), ("10", 10)]
)
def test_parse_size(text: str, n: int) -> None:
    assert parse_size(text) == n


def test_parse_size_rejects_garbage() -> None:
    with pytest.raises(InputError, match="not a size"):
        parse_size("big")


# ---------------------------------------------------------------- corruption


def _sqlite(path: Path, rows: int = 2000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE perf_db (id INTEGER PRIMARY KEY, solver TEXT, params TEXT)")
    conn.execute("CREATE INDEX idx ON perf_db(solver)")
    conn.executemany("INSERT INTO perf_db (solver, params) VALUES (?, ?)", [(f"s{i}", "p" * 50) for i in range(rows)])
    conn.commit()
    conn.close()
    return path


def test_sound_sqlite_db_passes(tmp_path: Path) -> None:
    assert sqlite_problem(_sqlite(tmp_path / "gfx942_104.ukdb.db")) is None
    empty = tmp_path / "new.udb"
    empty.touch()
    assert sqlite_problem(empty) is None


def test_corrupt_miopen_dbs_are_moved_aside(tmp_path: Path) -> None:
    good = _sqlite(tmp_path / "miopen" / "db" / "gfx942_104.udb")
    truncated = _sqlite(tmp_path / "miopen" / "db" / "gfx90a_110.udb")
    data = truncated.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    clobbered = _sqlite(tmp_path / "miopen" / "cache" / "gfx942.kdb")
    raw = bytearray(clobbered.read_bytes())
    raw[4096 : 4096 + 16] = b"\xff" * 16  # a b-tree page header overwritten mid-write
    clobbered.write_bytes(bytes(raw))
    garbage = tmp_path / "miopen" / "db" / "x.udb"
    garbage.write_bytes(b"not a database at all")

    found = {Path(c.path).name: c for c in check_and_quarantine(tmp_path)}
    assert set(found) == {"gfx90a_110.udb", "gfx942.kdb", "x.udb"}
    assert good.exists()
    for entry in found.values():
        assert not Path(entry.path).exists()
        assert entry.moved_to is not None
        assert Path(entry.moved_to).exists()
        assert "/.quarantine/" in entry.moved_to
    assert "bad header" in found["x.udb"].problem
    # quarantined files are neither counted nor checked again
    assert check_and_quarantine(tmp_path) == []
    assert collect_stats(tmp_path).total_files == 1


def test_cli_stats_reports_corruption_and_never_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "miopen" / "db").mkdir(parents=True)
    (tmp_path / "miopen" / "db" / "bad.udb").write_bytes(b"garbage" * 10)
    assert main(["cache", "stats", "--root", str(tmp_path), "--begin"]) == 0
    assert "corrupt entry" in capsys.readouterr().out
    out_json = tmp_path / "stats.json"
    assert main(["cache", "stats", "--root", str(tmp_path), "--json", "--out", str(out_json)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gatekeeper.cache-stats/v1"
    assert json.loads(out_json.read_text())["total_files"] == doc["total_files"]


def _report(out_dir: Path) -> Path:
    env = Environment(torch_version="2.13.0", python="3.11.7", host="ci")
    report = StageReport(
        stage="compatibility_check",
        status="passed",
        started_at="2026-12-01T12:00:00+00:00",
        duration_s=1.0,
        environment=env,
        metrics={"onnx_export_rate": Metric.of(1.0, "ratio", "higher")},
    )
    return write_stage(report, out_dir)


def test_stats_into_stage_report_adds_metrics(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    _write(root / "inductor" / "a", 10, age_s=100)
    stage_json = _report(tmp_path / "artifacts")
    cache_commands.stats_command(root=str(root), start=True)
    _write(root / "inductor" / "b", 20)
    assert cache_commands.stats_command(root=str(root), into=str(stage_json)) == 0
    report = read_stage(stage_json)
    assert report.metrics["onnx_export_rate"].value == 1.0
    assert report.metrics["kernel_cache_bytes"].value == 30
    assert report.metrics["kernel_cache_entries_created"].value == 1
    assert report.summary["kernel_cache"]["total_files"] == 2


def test_stats_into_missing_report_is_not_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cache_commands.stats_command(root=str(tmp_path), into=str(tmp_path / "nope.json")) == 0
    assert "wrote no report" in capsys.readouterr().out


def test_cli_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path / "inductor" / "a", 2048, age_s=100)
    _write(tmp_path / "inductor" / "b", 2048)
    assert main(["cache", "prune", "--root", str(tmp_path), "--max-size", "3K"]) == 0
    assert "pruned 1 files" in capsys.readouterr().out
    assert main(["cache", "prune", "--root", str(tmp_path / "missing"), "--max-size", "1G"]) == 2
    assert main(["cache", "prune", "--root", str(tmp_path), "--max-size", "lots"]) == 2


def test_stats_into_writes_the_file_it_names_and_only_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # issue 28: --into FILE said "added to FILE" and wrote <dir>/<stage>.json and its JUnit instead
    root = tmp_path / "cache"
    _write(root / "inductor" / "a", 10)
    written = _report(tmp_path / "artifacts")
    named = written.with_name("kept-copy.json")
    written.rename(named)
    (tmp_path / "artifacts" / "compatibility_check.junit.xml").unlink()
    assert cache_commands.stats_command(root=str(root), into=str(named)) == 0
    assert f"cache metrics added to {named}" in capsys.readouterr().out
    assert read_stage(named).metrics["kernel_cache_bytes"].value == 10
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == ["kept-copy.json"]
