from __future__ import annotations

from pathlib import Path

from gatekeeper.analyze import analyze, report_text
from gatekeeper.contract.analysis import ANALYSIS_SCHEMA, read_analysis
from gatekeeper.core import files

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def test_what_the_analyzer_writes_is_what_the_reader_accepts(tmp_path: Path) -> None:
    out = tmp_path / "analysis.json"
    diagnosis = analyze(logs=[LOGS / "device_oom__pytorch-175431.log"], fmt="json", out=out)
    got = read_analysis(out)
    assert got.category == diagnosis.category == "device_oom"
    assert got.matches
    assert got.to_dict()["schema"] == ANALYSIS_SCHEMA
    files.atomic_write(tmp_path / "again.json", report_text(diagnosis, "json"))
    assert read_analysis(tmp_path / "again.json") == got
