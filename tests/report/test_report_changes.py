"""The report's trend plots mark change points and the report lists them (html and markdown)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gatekeeper.contract.stage_report import Metric, write_stage
from gatekeeper.history import RunInfo
from gatekeeper.history.sqlite import SqliteStore
from gatekeeper.report import plots
from gatekeeper.report.data import collect, trend_changes
from gatekeeper.report.html import render_html
from gatekeeper.report.markdown import render_markdown
from tests.support.builders import report


def _perf(level: float, rng: np.random.Generator, night: int) -> object:
    samples = [list(level * np.exp(rng.normal(0, 0.01)) * np.exp(rng.normal(0, 0.01, 20))) for _ in range(10)]
    rep = report("performance_baseline", metrics={"latency_ms": Metric.of(level, "ms", "lower", samples)})
    return type(rep)(**{**rep.__dict__, "started_at": f"2026-11-{night:02d}T02:00:00+00:00"})


def _history(tmp_path: Path, *, step: float) -> Path:
    db = tmp_path / "h.db"
    store = SqliteStore(db, create=True)
    rng = np.random.default_rng(8)
    for night in range(1, 12):
        info = RunInfo("main", f"{night:040x}", str(500 + night), "pass", f"2026-11-{night:02d}T02:00:00+00:00")
        store.save(_perf(10.0 * (1 + step if night >= 7 else 1.0), rng, night), info)
    write_stage(_perf(10.0 * (1 + step), rng, 12), tmp_path / "artifacts")
    return db


def test_a_step_is_marked_on_the_trend_and_listed(tmp_path: Path) -> None:
    db = _history(tmp_path, step=0.05)
    data = collect(tmp_path / "artifacts", history=f"sqlite:{db}", limit=12)
    runs = data.history["performance_baseline"]
    [change] = trend_changes(runs, "latency_ms.p50")
    assert change.index == 6
    assert change.label == "11-07 #507"  # the first run after the step
    assert 0.04 < change.change < 0.06
    md = render_markdown(data)
    assert "**Change points in the trends**" in md
    # "#507" would be a reference to issue 507 in GitLab markdown: a zero-width space after "#" breaks it
    assert re.search(r"\| performance_baseline\.latency_ms\.p50 \| 11-07 #\u200b507 \| \+[45]\.\d% \\\[", md)
    pytest.importorskip("matplotlib", reason="matplotlib (the report extra) draws the plots")
    html = render_html(data)
    assert "<h2>Change points in the trends</h2>" in html
    [trend] = [p for p in plots.report_plots(data) if p.title.startswith("Trends")]
    texts = " ".join(re.findall(r">([^<>]+)</text>", trend.svg))
    assert "change point" in texts
    assert re.search(r"\+[45]\.\d%", texts)


def test_a_flat_history_marks_nothing(tmp_path: Path) -> None:
    db = _history(tmp_path, step=0.0)
    data = collect(tmp_path / "artifacts", history=f"sqlite:{db}", limit=12)
    assert trend_changes(data.history["performance_baseline"], "latency_ms.p50") == []
    assert "Change points" not in render_markdown(data)
