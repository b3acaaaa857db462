"""The spool a failed ``--record`` writes beside the verdict (``history-spool.jsonl``): a stage job can have
put anything under that name first. What is there is kept byte for byte, only a regular file is read back,
and the records are never lost (``gatekeeper/history/transfer.py``, ``_spool``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gatekeeper.core.errors import InputError
from gatekeeper.history.baseline import RunInfo
from gatekeeper.history.transfer import read_records, record
from tests.support.builders import report


def _record(tmp_path: Path, spool: Path) -> str:
    """Record one run into a store that cannot be opened (its parent is a file): the error's line."""
    (tmp_path / "afile").write_text("", encoding="utf-8")
    rows = [
        (
            report("functional_test", {"op_pass_rate": 0.99}),
            RunInfo("main", "a" * 40, "77", "pass", "2026-12-04T00:00:00+00:00"),
        )
    ]
    with pytest.raises(InputError) as err:
        record(f"sqlite:{tmp_path / 'afile' / 'h.db'}", rows, spool=spool)
    return err.value.line()


def _spooled(line: str) -> Path:
    return Path(line.split("records are spooled in ", 1)[1].split(";", 1)[0].split(" ", 1)[0])


def test_a_spool_that_is_there_already_is_left_as_it_is_and_never_joined(tmp_path: Path) -> None:
    # 2026-12-04 audit: the records were appended to what history-spool.jsonl held, kept byte for byte, and
    # `history import` believes every line of the file: a record a stage job planted there (its own verdict
    # "pass", its metrics, a pipeline id) became a baseline once the spool was imported. Now nothing joins a
    # file that was there before; the records go beside it, in a file the error names.
    spool = tmp_path / "history-spool.jsonl"
    planted = _record_line(tmp_path)
    spool.write_text(planted, encoding="utf-8")
    line = _record(tmp_path, spool)
    went = _spooled(line)
    assert went != spool
    assert went.parent == spool.parent
    assert spool.read_text(encoding="utf-8") == planted  # left as it is
    [(_, info)], _ = read_records(went)
    assert info.pipeline_id == "77"  # ours, and only ours
    assert f"history import --from {went}" in line
    # with no file there, the spool is the name evaluate documents
    fresh = tmp_path / "fresh" / "history-spool.jsonl"
    assert _spooled(_record(tmp_path, fresh)) == fresh


def _record_line(tmp_path: Path) -> str:
    """A record line as a stage job could plant it: a passing run of its own, with a pipeline id of its choice."""
    line = _record(tmp_path, tmp_path / "planted" / "history-spool.jsonl")
    text = _spooled(line).read_text(encoding="utf-8")
    return text.replace('"77"', '"666"')


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo", "too large"])  # and a regular file, above
def test_a_spool_that_is_no_regular_file_is_left_alone_and_the_records_go_beside_it(tmp_path: Path, kind: str) -> None:
    spool = tmp_path / "out" / "history-spool.jsonl"
    spool.parent.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("ssh-private-key-material\n", encoding="utf-8")
    if kind == "symlink":
        spool.symlink_to(outside)
    elif kind == "directory":
        spool.mkdir()
    elif kind == "fifo":
        os.mkfifo(spool)
    else:
        with spool.open("wb") as fh:  # sparse: larger than any spool, no disk used
            fh.truncate(256 * 2**20 + 1)
    line = _record(tmp_path, spool)
    went = _spooled(line)
    assert went != spool
    assert went.parent == spool.parent
    assert went.name.startswith("history-spool-")
    assert went.name.endswith(".jsonl")
    [(rep, info)], anchors = read_records(went)
    assert anchors == []
    assert info.pipeline_id == "77"
    assert rep.stage == "functional_test"
    assert "ssh-private-key-material" not in went.read_text(encoding="utf-8")  # the link's target is never read
    assert outside.read_text(encoding="utf-8") == "ssh-private-key-material\n"  # nor written
    assert f"history import --from {went}" in line
