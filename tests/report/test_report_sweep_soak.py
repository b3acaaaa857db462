"""The report's sweep (table and plot) and soak (plot over time), issue 17."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import matplotlib  # noqa: F401  (the report extra, which make setup installs: a missing one fails)

from gatekeeper.contract.metric_points import point_name
from gatekeeper.contract.soak_series import SERIES_FILE, read_series
from gatekeeper.contract.stage_report import Metric, write_stage
from gatekeeper.evaluate.run import run_evaluate
from gatekeeper.report.data import collect
from gatekeeper.report.html import render_html
from gatekeeper.report.markdown import render_markdown
from gatekeeper.report.perf_plots import soak_plot, sweep_plot
from tests.support.release_history import day, environment, performance

POINTS = [{"batch_size": b, "dtype": d} for b in ("1", "8", "64") for d in ("float32", "bfloat16")]


def _texts(svg: str) -> str:
    return " ".join(re.findall(r">([^<>]+)</text>", svg))


def sweep_report():
    base = performance(environment(), started_at=day(20))
    metrics = dict(base.metrics)
    for p in POINTS:
        b = int(p["batch_size"])
        ms = 2.0 + 0.5 * b * (0.6 if p["dtype"] == "bfloat16" else 1.0)
        metrics[point_name("latency_ms", p)] = Metric.of(ms, "ms", "lower", [[ms, ms * 1.01], [ms * 0.99, ms]])
        metrics[point_name("throughput", p)] = Metric.of(1000.0 * b / ms, "items/s", "higher")
    metrics[point_name("latency_ms", {"batch_size": "64", "dtype": "int8"})] = Metric.of(
        None, "ms", "lower", description="skipped: not reached"
    )
    return dataclasses.replace(base, metrics=metrics)


def test_sweep_plot_shows_latency_and_throughput_vs_batch_size_per_dtype() -> None:
    p = sweep_plot(sweep_report())
    assert p is not None
    text = _texts(p.svg)
    assert "Sweep: latency and throughput vs batch_size, a line per dtype" in text
    for label in ("latency_ms (ms)", "throughput (items/s)", "batch_size", "dtype=bfloat16", "dtype=float32"):
        assert label in text
    assert "dtype=int8" not in text  # a skipped point has no value to draw
    assert p.svg.startswith("<svg")
    assert sweep_plot(performance(environment(), started_at=day(1))) is None  # no sweep, no plot


def test_soak_plot_shows_throughput_and_memory_over_time() -> None:
    series = [{"t_s": 60.0 * i, "throughput": 100.0 - i * 0.1, "memory_mb": 300.0 + i} for i in range(1, 121)]
    rep = performance(environment(), started_at=day(1))
    rep = dataclasses.replace(
        rep,
        metrics={
            **rep.metrics,
            "throughput_decay": Metric.of(0.1, "ratio", "lower"),
            "memory_growth_mb_per_hour": Metric.of(60.0, "MB/h", "lower"),
        },
    )
    p = soak_plot(series, rep)
    assert p is not None
    text = _texts(p.svg)
    assert "Soak: throughput and memory over 2 h (throughput decay 10.0%, memory growth +60.0 MB/h)" in text
    for label in ("throughput (items/s)", "memory (MB)", "time since the soak started (h)"):
        assert label in text
    assert soak_plot(series[:1]) is None
    assert soak_plot([{"t_s": "nan"}, {"t_s": None}]) is None  # hostile lines are not points


def test_report_has_the_sweep_table_and_both_plots(tmp_path: Path) -> None:
    out = tmp_path / "art"
    out.mkdir()
    write_stage(sweep_report(), out)
    lines = [json.dumps({"t_s": i * 0.5, "throughput": 50.0, "memory_mb": 200.0 + i}) for i in range(1, 11)]
    (out / SERIES_FILE).write_text("\n".join(lines) + '\n{"t_s": 6, "thr', encoding="utf-8")  # torn last line
    gates = tmp_path / "gates.yaml"
    gates.write_text(
        "version: 1\ngates:\n  sweep-latency:\n    metric: performance_baseline.latency_ms[*]\n"
        '    pass: "<= 30"\n    on_missing: skip\n',
        encoding="utf-8",
    )
    run_evaluate(artifacts=out, gates_path=gates, out=out, environ={})
    data = collect(out)
    assert len(data.soak_series) == 10
    html = render_html(data)
    assert "<h3>Sweep over batch_size, dtype (7 points, each judged on its own)</h3>" in html
    assert html.count('<tr class="fail">') + html.count('<tr class="blocking">') == 1  # batch 64 float32: 34 ms
    assert 'aria-label="Sweep: latency and throughput vs batch_size, a line per dtype"' in html
    assert 'aria-label="Soak: throughput and memory over 5 s (memory growth +3.0 MB/h)"' in html
    md = render_markdown(data)
    assert "**Sweep** (7 points of batch_size, dtype" in md
    assert "not measured in this run: not reached" in md  # the skipped int8 point says why


def test_series_reader_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / SERIES_FILE
    line = json.dumps({"t_s": 1.0, "throughput": 1.0, "memory_mb": 1.0}) + "\n"
    path.write_text(line * 1000, encoding="utf-8")
    assert len(read_series(path)) == 1000
    assert len(read_series(path, max_bytes=len(line) * 10 + 5)) == 10  # the cut line is torn, so skipped
