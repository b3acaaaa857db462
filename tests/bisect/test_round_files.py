"""A stage-mode bisection's round files read back by ``--resume`` (bisect/measure.py ``Runner.reload``): one
bounded read of a regular file, the bytes hashed being the bytes parsed (the file sits in the bisect job's
artifacts: whoever can write them can swap it)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from gatekeeper.bisect.measure import Runner
from gatekeeper.contract.stage_report import write_stage
from gatekeeper.core import budgets
from gatekeeper.core.errors import InputError
from tests.support.release_history import environment, performance


def _round(tmp_path: Path) -> tuple[Runner, dict[str, str], Path]:
    out = tmp_path / "bisect"
    where = out / "candidates" / "0000-a" / "round1"
    path = write_stage(performance(environment(), started_at="2026-01-01T00:00:00+00:00"), where)
    runner = Runner(out=out, stage="performance_baseline", stage_args=(), command=(), metric=None, timeout=60.0)
    record = {"file": path.relative_to(out).as_posix(), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    return runner, record, path


def test_a_recorded_round_reads_back(tmp_path: Path) -> None:
    runner, record, _ = _round(tmp_path)
    report = runner.reload(record)
    assert report is not None
    assert report.stage == "performance_baseline"


def test_a_round_file_beyond_the_artifact_budget_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, record, path = _round(tmp_path)
    monkeypatch.setattr(budgets, "MAX_JSON_BYTES", 64)  # the file is larger: a read of all of it was unbounded
    with pytest.raises(InputError, match="round's stage result is larger than"):  # refused before it is hashed
        runner.reload(record)
    assert path.is_file()


def test_a_round_file_swapped_for_a_fifo_is_refused_never_a_hang(tmp_path: Path) -> None:
    runner, record, path = _round(tmp_path)
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(InputError):
        runner.reload(record)
