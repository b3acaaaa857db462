"""The spool a failed ``--record`` writes beside the verdict (``history-spool.jsonl``): a stage job can have
put anything under that name first. What is there is kept byte for byte, only a regular file is read back,
and the records are never lost (``gatekeeper/history/transfer.py``, ``_spool``)."""

from __future__ import annotations

import json
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


def test_records_are_appended_to_what_the_spool_holds_byte_for_byte(tmp_path: Path) -> None:
    spool = tmp_path / "history-spool.jsonl"
    before = b"\xff\xfe not UTF-8, kept as it is\n"
    spool.write_bytes(before)
    line = _record(tmp_path, spool)
    assert _spooled(line) == spool
    data = spool.read_bytes()
    assert data.startswith(before)
    [new] = data[len(before) :].decode().splitlines()
    assert json.loads(new)["info"]["pipeline_id"] == "77"


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo", "too large"])
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
