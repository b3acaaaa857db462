from __future__ import annotations

import re
import sys
from pathlib import Path

import matplotlib  # noqa: F401  (the report extra, which make setup installs: a missing one fails)
import pytest

from gatekeeper.contract.stage_report import Metric
from gatekeeper.report import plots
from gatekeeper.report.data import collect
from gatekeeper.report.html import render_html
from tests.support.release_history import day, environment, pipeline, write_pipeline


def _texts(svg: str) -> str:
    return " ".join(re.findall(r">([^<>]+)</text>", svg))


def test_latency_plot_has_title_axes_units_and_marks() -> None:
    cand = Metric.of(21.0, "ms", "lower", [[20.0, 21.0, 22.0, 40.0], [20.5, 21.5, 22.5, 41.0]])
    base = Metric.of(20.0, "ms", "lower", [19.0, 20.0, 21.0, 30.0])
    p = plots.latency_plot(cand, base, {"this run": {"P50": 21.2, "P99": 40.8}, "baseline": {"P50": 20.0, "P99": 29.7}})
    text = _texts(p.svg)
    assert "Latency distribution: this run vs baseline" in text
    assert "latency per iteration (ms)" in text
    assert "fraction of iterations ≤ x" in text
    for mark in ("P50 21.2", "P99 40.8", "P50 20", "P99 29.7", "this run (n=8)", "baseline (n=4)"):
        assert mark in text
    assert p.svg.startswith("<svg")


def test_trend_and_precision_plots_are_labelled() -> None:
    t = plots.trend_plot(
        [("functional_test.op_pass_rate", "ratio", [("11-01 abc", 0.97), ("this run", 0.95)])],
        channel="nightly",
        device="rocm gfx942",
    )
    text = _texts(t.svg)
    assert "Trends over the last 2 runs (nightly, rocm gfx942)" in text
    assert "run (oldest → newest)" in text
    assert "op_pass_rate (ratio)" in text
    errors = {"float32": Metric.of(1e-6, "ratio", "lower", [1e-7, 1e-6]), "bfloat16": Metric.of(8e-3, "ratio", "lower")}
    p = plots.precision_plot(errors, {"float32": 0.01})
    text = _texts(p.svg)
    assert "relative error vs CPU float64 reference, per dtype" in text
    assert "dtype" in text
    assert "relative error (ratio, log scale)" in text


def test_svg_ids_are_prefixed_per_plot() -> None:
    a = plots.precision_plot({"float32": Metric.of(1e-6, "ratio", "lower")})
    b = plots.trend_plot([("x.y", "ms", [("a", 1.0), ("b", 2.0)])], channel="stable", device="cpu cpu")
    ids_a = set(re.findall(r'\bid="([^"]+)"', a.svg))
    ids_b = set(re.findall(r'\bid="([^"]+)"', b.svg))
    assert ids_a
    assert not ids_a & ids_b
    # every reference points at an id of its own plot
    for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', a.svg):
        assert ref in ids_a


def test_report_without_matplotlib_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = write_pipeline(tmp_path, pipeline(environment(), started_at=day(3)))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert plots.matplotlib_missing() is not None
    html = render_html(collect(out))
    assert "matplotlib is not installed, so the report has no plots" in html
    assert "<svg" not in html
    assert "<h2>Operators by category" in html


def test_matplotlib_is_imported_lazily() -> None:
    """The CLI and the report modules import without matplotlib; only drawing needs it."""
    from gatekeeper.core import proc

    code = (
        "import sys, gatekeeper.cli, gatekeeper.report.html, gatekeeper.report.markdown, gatekeeper.release.matrix; "
        "print('matplotlib' in sys.modules)"
    )
    result = proc.run([sys.executable, "-c", code], timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert result.ok, result.stderr
    assert result.stdout.strip() == "False"
