"""Reading a store that does not exist is exit 2 naming the path, and creates nothing (issue: a mistyped
``sqlite:`` path used to create an empty database and its folder and exit 0). Only a recording use creates
a store; evaluate's ``--baseline`` reads a store that does not exist yet as an empty one (a first run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.contract.stage_report import write_stage
from tests.support.builders import report


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--artifacts", "artifacts", "--history", "sqlite:typo/history.db"],
        ["report", "--artifacts", "artifacts", "--baseline", "sqlite:typo/history.db"],
        ["matrix", "--history", "sqlite:typo/history.db", "--out", "m"],
        ["advise", "--history", "sqlite:typo/history.db"],
        ["history", "changes", "--history", "sqlite:typo/history.db"],
        ["history", "anchor", "--history", "sqlite:typo/history.db"],
        ["history", "export", "--history", "sqlite:typo/history.db", "--out", "x.jsonl"],
    ],
)
def test_reading_a_missing_store_is_exit_2_and_creates_nothing(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "artifacts").mkdir()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("gatekeeper: typo/history.db: no such history store; hint: check the path")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artifacts"]  # no typo/, no history.db


def test_a_first_run_reads_a_missing_baseline_store_as_empty_and_records_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_stage(report("functional_test", {"op_pass_rate": 0.99}), tmp_path / "artifacts")
    code = main(["evaluate", "--baseline", "sqlite:.gatekeeper/h.db", "--gates", str(_gates(tmp_path))])
    assert code == 0, capsys.readouterr().err
    assert not (tmp_path / ".gatekeeper").exists()  # reading created nothing
    assert main(["evaluate", "--record", "sqlite:.gatekeeper/h.db", "--gates", str(_gates(tmp_path))]) == 0
    assert (tmp_path / ".gatekeeper" / "h.db").is_file()  # recording did
    assert main(["report", "--history", "sqlite:.gatekeeper/h.db", "--format", "md", "--out", "r.md"]) == 0


def _gates(tmp_path: Path) -> Path:
    path = tmp_path / "g.yaml"
    path.write_text(
        "version: 1\ngates:\n  cov:\n    metric: functional_test.op_pass_rate\n    pass: '>= 0.9'\n", encoding="utf-8"
    )
    return path


@pytest.mark.parametrize("spec", ["earlier-run", "file:earlier-run"])
def test_a_first_run_reads_a_missing_baseline_directory_as_empty(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """README: "evaluate --baseline reads a store that does not exist yet as empty: a first run" -- a directory
    store too (`baseline: file:.gatekeeper-baselines` in CI was exit 2 on the first pipeline, before any copy)."""
    monkeypatch.chdir(tmp_path)
    write_stage(report("functional_test", {"op_pass_rate": 0.99}), tmp_path / "artifacts")
    assert main(["evaluate", "--baseline", spec, "--gates", str(_gates(tmp_path))]) == 0, capsys.readouterr().err
    assert not (tmp_path / "earlier-run").exists()  # reading created nothing
    # reading it for a report (not a first run) still names it
    assert main(["report", "--history", spec, "--format", "md", "--out", "r.md"]) == 2
    assert "earlier-run: baseline directory not found" in capsys.readouterr().err
