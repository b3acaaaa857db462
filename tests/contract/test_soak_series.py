"""contract/soak_series.py: the soak windows the report plots (the code under test writes the file), read line
by line by the strict JSON reader; a line it refuses is skipped like a torn one, never exit 70 or a decoy."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gatekeeper.contract.soak_series import read_series

GOOD = {"t_s": 30.0, "iterations": 900, "throughput": 1200.0, "latency_ms_median": 26.5, "memory_mb": 2048.0}


def test_a_hostile_line_is_skipped_and_the_good_ones_kept(tmp_path: Path) -> None:
    path = tmp_path / "performance_baseline.soak.jsonl"
    lines = [
        json.dumps(GOOD),
        "[" * 5000 + "]" * 5000,  # deeper than the JSON parser recurses: was exit 70 (RecursionError)
        '{"t_s": 1.0, "throughput": 1.0e9, "throughput": 5.0}',  # a duplicate key: the decoy was kept
        '{"t_s": 99' + "9" * 400 + "}",  # a 400-digit number
        '{"t_s": NaN}',
        json.dumps({**GOOD, "t_s": 60.0}),
        '{"t_s": 90.0, "thr',  # torn by a killed writer
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
    assert read_series(path) == [GOOD, {**GOOD, "t_s": 60.0}]


def test_a_series_that_is_not_a_regular_file_is_none(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)  # nobody writes: a reader that opened it blocking would hang here
    assert read_series(fifo) == []
    (tmp_path / "dir.jsonl").mkdir()
    assert read_series(tmp_path / "dir.jsonl") == []
    (tmp_path / "loop.jsonl").symlink_to(tmp_path / "loop.jsonl")
    assert read_series(tmp_path / "loop.jsonl") == []
    assert read_series(tmp_path / "missing.jsonl") == []
