"""A stored record that does not read (here: a report whose environment carries a control character, which the
stage schema refuses) is left out of the report's trends, the version matrix and advise's evidence, and each
says so in its notes, once, with the record named: what it could not use is never left out unsaid."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from gatekeeper.release.advise import AdviseInputs, run_advise
from gatekeeper.report import write_report
from gatekeeper.report.matrix_page import write_matrix
from tests.support.release_history import day, environment, pipeline, record, sqlite_store, write_pipeline

LEFT_OUT = "skipped: environment.driver: the value"


def _history(tmp_path: Path) -> str:
    store = sqlite_store(tmp_path)
    env = environment(channel="stable")
    for k in (1, 2, 3):
        record(store, pipeline(env, started_at=day(k)), verdict="pass", pipeline_id=str(k), commit=f"{k:040x}")
    db = tmp_path / "history.db"
    with sqlite3.connect(db) as conn:  # one job's record, changed after it was written
        for rid, text in conn.execute("SELECT id, report FROM results WHERE pipeline_id = '2'").fetchall():
            doc = json.loads(text)
            doc["environment"]["driver"] = "6.8\x1b]8;;https://evil.example\x07"
            conn.execute("UPDATE results SET report = ? WHERE id = ?", (json.dumps(doc), rid))
    return f"sqlite:{db}"


def test_the_report_names_the_record_it_left_out(tmp_path: Path) -> None:
    history = _history(tmp_path)
    artifacts = write_pipeline(tmp_path / "art", pipeline(environment(channel="stable"), started_at=day(4)))
    page = write_report(artifacts=artifacts, out=tmp_path / "report.md", history=history, fmt="md").read_text()
    notes = [line for line in page.splitlines() if LEFT_OUT in line.replace("\\", "")]
    assert notes, page
    assert "\x1b" not in page
    assert "evil.example](" not in page


def test_the_version_matrix_names_the_record_it_left_out(tmp_path: Path) -> None:
    history = _history(tmp_path)
    paths = write_matrix(history=history, matrix_file=None, out=tmp_path / "m")
    md = next(p for p in paths if p.name == "matrix.md").read_text()
    assert LEFT_OUT in md.replace("\\", "")
    assert "\x1b" not in md


def test_advise_names_the_record_it_left_out(tmp_path: Path) -> None:
    history = _history(tmp_path)
    text = run_advise(AdviseInputs(), history=history, fmt="json")
    notes = json.loads(text)["notes"]
    left_out = [n for n in notes if LEFT_OUT in n]
    assert len(left_out) == len(set(left_out)) >= 1
