"""The kernel cache is hostile input (docs/security.md, "The kernel cache"): any CI job with the cache can write
it. The matrix (tests/security/matrix.py) runs every mutation class against the snapshot file; what has the
shape of a directory is here: links out of the cache, FIFOs and sockets, a tree deeper than Python's recursion
limit, the quarantine or the probe planted as links, and names that would forge terminal lines."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import socket
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.core.errors import InputError
from gatekeeper.kernel_cache.integrity import QUARANTINE, check_and_quarantine
from gatekeeper.kernel_cache.usage import SNAPSHOT, begin, collect_stats, prune, read_snapshot
from tests.security.matrix import TERMINAL_CONTROL

OLD_NS = 1_577_836_800 * 10**9  # 2020-01-01: the times of every file outside the cache


def _db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE perf_db (id INTEGER PRIMARY KEY, solver TEXT)")
    conn.execute("INSERT INTO perf_db (solver) VALUES ('s')")
    conn.commit()
    conn.close()
    return path


def _aged(path: Path) -> Path:
    os.utime(path, ns=(OLD_NS, OLD_NS))
    return path


def _aged_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return _aged(path)


def _times(path: Path) -> tuple[int, int]:
    """Access and modification times, by stat only (reading the file here would move its access time)."""
    st = path.stat()
    return st.st_atime_ns, st.st_mtime_ns


def _quarantined(root: Path) -> dict[str, Path]:
    """rel path in the quarantine (without its time directory) -> the item, by lstat."""
    base = root / QUARANTINE
    out = {}
    for stamp in base.iterdir() if base.is_dir() else ():
        for dirpath, dirs, names in os.walk(stamp):
            for name in dirs + names:
                path = Path(dirpath) / name
                if path.is_symlink() or not path.is_dir():
                    out[path.relative_to(stamp).as_posix()] = path
    return out


def _cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------- the snapshot


BAD_SNAPSHOTS = {
    "a list": ("[1, 2]", ""),
    "files a list, started_ns a string": ('{"files": [], "started_ns": "x"}', ""),
    "wrong types with a matching file": ('{"files": {"a": "zz"}, "started_ns": "x", "atime": true}', ""),
    "a file's time a string": ('{"files": {"a": "zz"}, "started_ns": 1, "atime": true}', "files.a"),
    "another document": ('{"schema": "gatekeeper.verdict/v1", "files": {}, "started_ns": 1, "atime": true}', "schema"),
    "a key of its own": ('{"files": {}, "started_ns": 1, "atime": true, "sudo": 1}', ""),
    "a negative start": ('{"files": {}, "started_ns": -5, "atime": true}', "started_ns"),
    "truncated": ('{"files": {"a": 1', "1:"),
    "a duplicate key": ('{"files": {}, "started_ns": 1, "started_ns": 2, "atime": true}', "1:"),
}


@pytest.mark.parametrize("text", [v[0] for v in BAD_SNAPSHOTS.values()], ids=list(BAD_SNAPSHOTS))
def test_a_bad_snapshot_is_one_line_naming_the_file_the_place_and_the_fix(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a").write_text("hi")
    (tmp_path / SNAPSHOT).write_text(text)
    code, out, err = _cli("cache", "stats", "--root", str(tmp_path), capsys=capsys)
    assert code == 2, err
    (line,) = err.splitlines()
    place = dict(BAD_SNAPSHOTS.values())[text]
    assert line.startswith(f"gatekeeper: {tmp_path / SNAPSHOT}:{place}"), line
    assert "hint: run 'gatekeeper cache stats --begin' at the start of the job" in line
    assert "internal error" not in err
    # --begin writes a new snapshot over it (it never reads the old one); the end of the job then reads it
    code, out, err = _cli("cache", "stats", "--root", str(tmp_path), "--begin", capsys=capsys)
    assert code == 0, err
    assert read_snapshot(tmp_path / SNAPSHOT) is not None
    code, out, err = _cli("cache", "stats", "--root", str(tmp_path), capsys=capsys)
    assert (code, err) == (0, ""), err
    assert "entries used" in out


def test_a_snapshot_of_an_older_gatekeeper_without_a_schema_name_is_read(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("hi")
    mtime = (tmp_path / "a").stat().st_mtime_ns
    (tmp_path / SNAPSHOT).write_text(json.dumps({"started_ns": 1, "atime": False, "files": {"a": mtime}}))
    stats = collect_stats(tmp_path)
    assert stats.created == 0
    assert "access times" in (stats.used_unknown_reason or "")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shape", ["link to a valid snapshot outside", "FIFO", "directory", "dangling link"])
def test_a_snapshot_that_is_no_regular_file_is_refused_unread_and_begin_replaces_it(
    tmp_path: Path, shape: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    snap = root / SNAPSHOT
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"started_ns": 1, "atime": True, "files": {}}))
    if shape == "FIFO":
        os.mkfifo(snap)
    elif shape == "directory":
        snap.mkdir()
    else:
        snap.symlink_to(outside if shape.startswith("link") else tmp_path / "nothing")
    code, _, err = _cli("cache", "stats", "--root", str(root), capsys=capsys)
    assert code == 2
    assert f"{snap}: " in err
    assert "where the cache snapshot belongs" in err
    code, out, err = _cli("cache", "stats", "--root", str(root), "--begin", capsys=capsys)
    assert code == 0, err
    assert snap.is_file()
    assert not snap.is_symlink()
    assert read_snapshot(snap) is not None
    assert f"corrupt entry {snap}" in out, "what was there is moved aside, and said"
    assert json.loads(outside.read_text())["started_ns"] == 1, "the link's target is untouched"
    snap.unlink()
    snap.symlink_to(outside)
    with pytest.raises(InputError, match="where the cache snapshot belongs"):
        begin(root)  # the library refuses too, when nobody moved it aside first


# ---------------------------------------------------------------- links, FIFOs, sockets


def _hostile_cache(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """A cache with one real entry and, around it, links to files and a directory outside, a FIFO named like a
    MIOpen database, another FIFO and a socket; the outside files dated 2020."""
    outside = tmp_path / "outside"
    outside_dir = outside / "dir"
    outside_dir.mkdir(parents=True)
    (outside / "plain.bin").write_bytes(b"p" * 5000)
    (outside_dir / "kernel.py").write_bytes(b"k" * 7000)
    # atime == mtime: under relatime (Linux's default) a read moves the access time, as begin's utime would
    targets = {
        "db": _aged(_db(outside / "secret.kdb")),
        "plain": _aged(outside / "plain.bin"),
        "in_dir": _aged(outside_dir / "kernel.py"),
    }
    root = tmp_path / "cache"
    (root / "miopen" / "db").mkdir(parents=True)
    (root / "inductor").mkdir()
    (root / "inductor" / "real.py").write_bytes(b"r" * 10)
    (root / "miopen" / "db" / "gfx942.kdb").symlink_to(targets["db"])
    (root / "inductor" / "plain.bin").symlink_to(targets["plain"])
    (root / "triton").symlink_to(outside_dir, target_is_directory=True)
    os.mkfifo(root / "miopen" / "db" / "gfx90a.udb")
    os.mkfifo(root / "inductor" / "pipe")
    cwd = Path.cwd()
    os.chdir(root / "inductor")  # a socket's path is short (108 bytes): bind it relative
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind("sock")
        sock.close()
    finally:
        os.chdir(cwd)
    return root, targets


@pytest.mark.timeout(60)  # a FIFO opened for reading blocks forever: a hang fails here
def test_nothing_in_the_cache_is_followed_timed_or_read_through_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, targets = _hostile_cache(tmp_path)
    before = {k: _times(p) for k, p in targets.items()}
    assert set(before.values()) == {(OLD_NS, OLD_NS)}
    content = {k: hashlib.sha256(p.read_bytes()).hexdigest() for k, p in targets.items()}
    for p in targets.values():
        _aged(p)  # reading them moved their access times
    # prune first, on the cache as restored: it deletes only regular files, counts only their sizes
    result = prune(root, 10**9)
    assert result.before_bytes == 10
    code, out, err = _cli("cache", "stats", "--root", str(root), "--begin", capsys=capsys)
    assert code == 0, err
    snap = read_snapshot(root / SNAPSHOT)
    assert snap is not None
    assert list(snap["files"]) == ["inductor/real.py"]
    code, out, err = _cli("cache", "stats", "--root", str(root), "--json", capsys=capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["total_files"], doc["total_bytes"]) == (1, 10), "sizes are the entries' own, never a target's"
    result = prune(root, 0)
    assert (result.removed_files, result.before_bytes) == (1, 10)
    # every file outside: same bytes, same access and modification times (begin sets atimes, a read moves them)
    assert {k: _times(p) for k, p in targets.items()} == before
    assert {k: hashlib.sha256(p.read_bytes()).hexdigest() for k, p in targets.items()} == content
    moved = _quarantined(root)
    assert set(moved) == {
        "miopen/db/gfx942.kdb", "inductor/plain.bin", "triton", "miopen/db/gfx90a.udb", "inductor/pipe",
        "inductor/sock",
    }  # fmt: skip
    for rel in ("miopen/db/gfx942.kdb", "inductor/plain.bin", "triton"):
        assert moved[rel].is_symlink(), "the link itself is moved, its target stays where it is"
    assert moved["miopen/db/gfx90a.udb"].is_fifo()
    assert moved["inductor/sock"].is_socket()
    assert all(p.exists() for p in targets.values())
    assert not (root / "triton").exists()
    assert not (root / "triton").is_symlink()


def test_each_kind_is_named_in_the_corrupt_entry(tmp_path: Path) -> None:
    root, _ = _hostile_cache(tmp_path)
    found = {Path(c.path).relative_to(root).as_posix(): c.problem for c in check_and_quarantine(root)}
    assert found == {
        "inductor/pipe": "a FIFO (a cache holds regular files)",
        "inductor/plain.bin": "a symbolic link (a cache holds regular files)",
        "inductor/sock": "a socket (a cache holds regular files)",
        "miopen/db/gfx90a.udb": "a FIFO (a cache holds regular files)",
        "miopen/db/gfx942.kdb": "a symbolic link (a cache holds regular files)",
        "triton": "a symbolic link (a cache holds regular files)",
    }


def test_a_cache_root_that_is_a_link_the_user_chose_keeps_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "real"
    (real / "inductor").mkdir(parents=True)
    (real / "inductor" / "k.py").write_bytes(b"k" * 100)
    _db(real / "miopen" / "db" / "gfx942.udb")
    link = tmp_path / "cache-link"
    link.symlink_to(real, target_is_directory=True)
    monkeypatch.setenv("GATEKEEPER_CACHE_DIR", str(link))
    assert _cli("cache", "stats", "--begin", capsys=capsys)[0] == 0
    assert (real / SNAPSHOT).is_file()
    code, out, _ = _cli("cache", "stats", "--json", capsys=capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["total_files"] == 2
    assert doc["corrupt"] == []
    assert doc["entries_created"] == 0
    assert _cli("cache", "prune", "--max-size", "0", capsys=capsys)[0] == 0
    assert link.is_symlink()
    assert not (real / "inductor" / "k.py").exists()


def test_a_quarantine_planted_as_a_link_never_receives_an_entry(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "cache"
    (root / "miopen").mkdir(parents=True)
    (root / "miopen" / "bad.kdb").write_bytes(b"not a database")
    (root / QUARANTINE).symlink_to(outside, target_is_directory=True)
    found = check_and_quarantine(root)
    assert [Path(c.path).name for c in found] == [QUARANTINE, "bad.kdb"]
    assert "where the quarantine directory belongs" in found[0].problem
    assert list(outside.iterdir()) == []
    assert (root / QUARANTINE).is_dir()
    assert not (root / QUARANTINE).is_symlink()
    assert set(_quarantined(root)) == {QUARANTINE, "miopen/bad.kdb"}


def test_time_directories_planted_in_the_quarantine_are_never_used(tmp_path: Path) -> None:
    # The quarantine's directory for this run is new (mkdtemp): links planted under the names the next seconds
    # would have (a guessable time) cannot send an entry out of the cache.
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "cache"
    (root / QUARANTINE).mkdir(parents=True)
    now = dt.datetime.now(dt.timezone.utc)
    for s in range(-2, 30):
        stamp = (now + dt.timedelta(seconds=s)).strftime("%Y%m%dT%H%M%S")
        (root / QUARANTINE / stamp).symlink_to(outside, target_is_directory=True)
    (root / "bad.kdb").write_bytes(b"not a database")
    (found,) = check_and_quarantine(root)
    assert found.moved_to is not None
    assert list(outside.iterdir()) == []
    assert not Path(found.moved_to).parent.is_symlink()


def test_the_atime_probe_cannot_be_planted_as_a_link(tmp_path: Path) -> None:
    outside = _aged_text(tmp_path / "victim", "keep me")
    before = _times(outside)
    root = tmp_path / "cache"
    root.mkdir()
    (root / ".gatekeeper-atime-probe").symlink_to(outside)
    begin(root)
    assert _times(outside) == before
    assert outside.read_text() == "keep me"


# ---------------------------------------------------------------- depth


def _nest(root: Path, depth: int) -> Path:
    """``root/d/d/.../d`` ``depth`` levels deep (made relative: each call stays far below PATH_MAX)."""
    cwd = Path.cwd()
    os.chdir(root)
    try:
        for _ in range(depth):
            os.mkdir("d")
            os.chdir("d")
        Path("bad.kdb").write_bytes(b"not a database")
        Path("k.bin").write_bytes(b"k" * 3)
        return Path(os.getcwd())
    finally:
        os.chdir(cwd)


def _remove_deep(path: Path) -> None:
    """rm -r without recursion and without long paths (shutil.rmtree, as pytest's clean-up calls it, recurses
    once per level): down by chdir, removing on the way back up."""
    cwd = Path.cwd()
    os.chdir(path)
    names: list[str] = []
    try:
        while True:
            entries = list(os.scandir("."))
            sub = next((e.name for e in entries if e.is_dir(follow_symlinks=False)), None)
            if sub is not None:
                os.chdir(sub)
                names.append(sub)
                continue
            for entry in entries:
                os.unlink(entry.name)
            if not names:
                break
            os.chdir("..")
            os.rmdir(names.pop())
    finally:
        os.chdir(cwd)


@pytest.fixture
def deep_root() -> Iterator[Path]:
    """A cache root for a deep tree, outside pytest's tmp_path: pytest removes old tmp_path trees with
    shutil.rmtree, which a tree this deep ends with a RecursionError (in every later session of the machine),
    should this test be killed before it removes its own."""
    root = Path(tempfile.mkdtemp(prefix="gatekeeper-deep-cache-"))
    try:
        yield root
    finally:
        _remove_deep(root)
        root.rmdir()


def test_a_tree_deeper_than_the_recursion_limit_is_walked(deep_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = deep_root
    _nest(root, 1500)  # a path of ~3,000 bytes: within PATH_MAX, beyond Python's 1,000 frames
    code, out, err = _cli("cache", "stats", "--root", str(root), "--begin", capsys=capsys)
    assert code == 0, err
    assert "corrupt entry" in out
    assert "bad.kdb" in out
    assert "1 entries at job start" in out
    code, out, err = _cli("cache", "stats", "--root", str(root), "--json", capsys=capsys)
    assert code == 0, err
    assert json.loads(out)["total_files"] == 1
    code, out, err = _cli("cache", "prune", "--root", str(root), "--max-size", "0", capsys=capsys)
    assert code == 0, err
    assert "pruned 1 files" in out
    assert not (root / "d").exists(), "the emptied tree is removed, deepest first"


def test_a_tree_beyond_path_max_ends_every_command_normally(
    deep_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _nest(deep_root, 2200)  # past PATH_MAX (4,096): nothing down there can be opened by path, by anyone
    for argv in (("stats", "--begin"), ("stats",), ("prune", "--max-size", "0")):
        code, _, err = _cli("cache", *argv, "--root", str(deep_root), capsys=capsys)
        assert (code, err) == (0, ""), argv


# ---------------------------------------------------------------- names on the terminal


def test_hostile_names_cannot_forge_terminal_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "c"
    kind = root / "x\ngatekeeper: cache: FORGED kind\x1b[2J"
    kind.mkdir(parents=True)
    (kind / "k\u202e.bin").write_bytes(b"k")
    (root / "inductor").mkdir()
    (root / "inductor" / "a\ngatekeeper: cache: FORGED entry\x1b]0;t\x07.kdb").write_bytes(b"garbage")
    with contextlib.suppress(OSError):  # a name that is not UTF-8 (some filesystems refuse it)
        (root / os.fsdecode(b"\xff.kdb")).write_bytes(b"garbage")
    for argv in (("--begin",), (), ("--out", str(tmp_path / "s.json"))):
        code, out, err = _cli("cache", "stats", "--root", str(root), *argv, capsys=capsys)
        assert code == 0, err
        assert not TERMINAL_CONTROL.search(out + err)
        assert not [line for line in out.splitlines() if line.startswith("gatekeeper: cache: FORGED")]
        (root / "inductor" / "b\ngatekeeper: cache: FORGED entry.kdb").write_bytes(b"garbage")
    assert "\\x0agatekeeper: cache: FORGED" in out


def test_hard_links_count_one_files_bytes_once_and_one_shared_with_the_outside_keeps_its_times(
    tmp_path: Path,
) -> None:
    """A file with two names in the cache is its bytes once (stats) and frees them with its last name (prune); a
    hard link to a file outside the cache is counted, but begin never sets that file's times."""
    root = tmp_path / "kc"
    (root / "inductor").mkdir(parents=True)
    twice = root / "inductor" / "a.so"
    twice.write_bytes(b"k" * 1000)
    os.link(twice, root / "inductor" / "b.so")
    outside = _aged_text(tmp_path / "outside.txt", "x" * 10)
    os.link(outside, root / "inductor" / "shared.txt")
    begin(root)
    assert _times(outside) == (OLD_NS, OLD_NS)
    snap = read_snapshot(root / SNAPSHOT)
    assert snap is not None
    assert sorted(snap["files"]) == ["inductor/a.so", "inductor/b.so", "inductor/shared.txt"]
    stats = collect_stats(root)
    assert (stats.total_files, stats.total_bytes, stats.created) == (3, 1010, 0)
    assert stats.by_kind["inductor"] == {"bytes": 1010, "files": 3}
    # the oldest first: shared.txt (2020) brings the cache to 1000 bytes, under 1005; counted per name (2010
    # bytes), a.so would have gone too, freeing nothing while b.so holds the same bytes
    result = prune(root, 1005)
    assert (result.removed_files, result.removed_bytes, result.before_bytes, result.after_bytes) == (1, 10, 1010, 1000)
    assert twice.exists()
    assert outside.read_text() == "x" * 10  # the outside file lost a name in the cache, not its bytes
    result = prune(root, 500)
    assert (result.removed_files, result.removed_bytes, result.after_bytes) == (2, 1000, 0)
