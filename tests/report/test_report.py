from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gatekeeper import cli
from gatekeeper.contract.analysis import read_analysis
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.run import run_evaluate
from gatekeeper.history import BaselineStore
from gatekeeper.report.data import category_rows, collect
from gatekeeper.report.html import render_html
from gatekeeper.report.markdown import render_markdown
from gatekeeper.report.plots import matplotlib_missing
from tests.support.release_history import STORES, day, environment, functional, pipeline, record, write_pipeline

ROOT = Path(__file__).resolve().parents[2]
HAVE_MATPLOTLIB = matplotlib_missing() is None

ANALYSIS = {
    "category": "miopen_error",
    "known_issue": "rocm-miopen-find-db",
    "explanation": "MIOpen could not find a kernel in its find-db for this convolution.",
    "matches": [{"line": 412, "text": "MIOpen Error: No suitable algorithm was found", "rule": "miopen.no_algorithm"}],
    "remediation": ["export MIOPEN_FIND_MODE=NORMAL", "clear ~/.config/miopen"],
}


def _store(directory: Path, kind: str = "sqlite", n: int = 6) -> BaselineStore:
    """Six passed runs in a real store, and noise that this run's trends and baseline must leave out."""
    store = STORES[kind](directory)
    env = environment()
    for k in range(1, n + 1):
        record(store, pipeline(env, started_at=day(k), median_ms=20 + k * 0.1), verdict="pass", pipeline_id=str(k))
    # another device and another channel: must not appear in this run's trends
    record(store, pipeline(environment(arch="gfx942"), started_at=day(9)), verdict="pass", pipeline_id="x1")
    record(store, pipeline(environment(channel="nightly"), started_at=day(9)), verdict="blocked", pipeline_id="x2")
    return store


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    out = write_pipeline(tmp_path / "art", pipeline(environment(), started_at=day(20), pass_rate=0.88, tail_ms=45.0))
    run_evaluate(artifacts=out, gates_path=ROOT / "gates.yaml", out=out, environ={})
    return out


@pytest.mark.parametrize("kind", sorted(STORES))
def test_collect_reads_verdict_history_of_same_channel_and_device(artifacts: Path, tmp_path: Path, kind: str) -> None:
    data = collect(artifacts, history_store=_store(tmp_path / "hist", kind), limit=4)
    assert data.verdict is not None
    assert data.verdict.result == "blocked"
    runs = data.history["functional_test"]
    assert [r.current for r in runs] == [False, False, False, True]  # limit counts this run
    assert [r.report.started_at for r in runs[:-1]] == [day(4), day(5), day(6)]  # oldest -> newest
    assert all(r.report.environment.arch == "gfx90a" and r.report.environment.channel == "stable" for r in runs)
    # without --baseline, the newest earlier run is the latency baseline
    assert data.baselines["performance_baseline"].started_at == day(6)


@pytest.mark.parametrize("kind", sorted(STORES))
def test_a_newer_blocked_run_is_never_the_baseline(artifacts: Path, tmp_path: Path, kind: str) -> None:
    store = _store(tmp_path / "hist", kind)
    record(store, pipeline(environment(), started_at=day(7), median_ms=40.0), verdict="blocked", pipeline_id="b7")
    data = collect(artifacts, history_store=store, baseline_store=store, limit=4)
    assert data.baselines["performance_baseline"].started_at == day(6)  # the store's pass-or-warn rule
    assert data.history["performance_baseline"][-2].report.started_at == day(7)  # the trend shows it all the same


def test_collect_without_verdict_says_so(tmp_path: Path) -> None:
    out = write_pipeline(tmp_path, pipeline(environment(), started_at=day(3)))
    data = collect(out)
    assert data.verdict is None
    assert any("no verdict.json" in n for n in data.notes)
    html = render_html(data, plots=[])
    assert "NO VERDICT" in html
    assert "functional_test" in html


def test_html_has_verdict_first_gates_categories_environment_diagnosis(artifacts: Path, tmp_path: Path) -> None:
    (artifacts / "analysis.json").write_text(json.dumps(ANALYSIS))
    html = render_html(collect(artifacts, history_store=_store(tmp_path / "hist")))
    order = [
        html.index(s)
        for s in ("BLOCKED", "<h2>Gates", "<h2>Failure diagnosis", "<h2>Operators", "<h2>Plots", "<h2>Environment")
    ]
    assert order == sorted(order)
    assert "rocm-miopen-find-db" in html
    assert "MIOPEN_FIND_MODE=NORMAL" in html
    assert "412: MIOpen Error" in html
    assert "aten.convolution[0]" in html  # a failing operator of the category table
    assert "gfx90a:sramecc+:xnack-" in html  # environment
    # self-contained: no external references of any kind
    assert not re.search(r"""(src|href)=["'](https?:|//)""", html)
    assert "<script" not in html
    if HAVE_MATPLOTLIB:  # without it the page says so (tests/test_report_plots.py)
        assert html.count("<svg") == 3  # latency, precision, trends
    # every inline SVG id is unique on the page (matplotlib reuses ids per figure)
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))
    _Parser().feed(html)  # well-formed enough to parse


class _Parser(HTMLParser):
    pass


def test_html_escapes_untrusted_text(tmp_path: Path) -> None:
    evil = {**ANALYSIS, "explanation": "<script>alert(1)</script>"}
    out = write_pipeline(tmp_path, pipeline(environment(), started_at=day(3)))
    (out / "analysis.json").write_text(json.dumps(evil))
    html = render_html(collect(out), plots=[])
    assert "<script>alert" not in html
    assert "&lt;script&gt;" in html


def test_markdown_for_mr_note(artifacts: Path, tmp_path: Path) -> None:
    (artifacts / "analysis.json").write_text(json.dumps(ANALYSIS))
    md = render_markdown(collect(artifacts, history_store=_store(tmp_path / "hist"), limit=3))
    assert md.startswith("## gatekeeper: ⛔ BLOCKED")
    assert "| **operator-coverage** |" in md  # the blocking gate stands out
    assert "**Failure diagnosis: miopen_error** (known issue **rocm-miopen-find-db**)" in md
    assert "| convolution | 45 | 40 | 88.89% |" in md
    trend = next(line for line in md.splitlines() if line.startswith("| functional_test.op_pass_rate |"))
    assert trend.count("→") == 2
    assert trend.endswith("0.88 |")


def test_analysis_absent_or_partial_is_tolerated(tmp_path: Path) -> None:
    p = tmp_path / "analysis.json"
    p.write_text(json.dumps({"category": "segfault", "matches": [{"text": "Segmentation fault"}]}))
    d = read_analysis(p)
    assert d.category == "segfault"
    assert d.known_issue is None
    assert d.matches[0].line is None
    assert d.remediation == ()


def test_analysis_of_the_wrong_shape_is_an_input_error(tmp_path: Path) -> None:
    p = tmp_path / "analysis.json"
    for doc in ([{"category": "segfault"}], {"category": 3}, {"category": "x", "matches": "line 3"},
                {"category": "x", "schema": "gatekeeper.analysis/v9"}):  # fmt: skip
        p.write_text(json.dumps(doc))
        with pytest.raises(InputError):
            read_analysis(p)


def test_category_rows_fall_back_to_metrics() -> None:
    report = functional(environment(), started_at=day(1))
    report = type(report)(**{**report.__dict__, "summary": {}})
    rows = {r.category: r for r in category_rows(report)}
    assert set(rows) == {"basic_math", "convolution", "reduction", "matrix", "custom_backward", "distributed"}
    assert rows["reduction"].pass_rate == 1.0
    assert rows["reduction"].cases is None


def test_cli_report_html_and_md(artifacts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r" / "report.md"
    assert cli.main(["report", "--artifacts", str(artifacts), "--out", str(out), "--format", "md"]) == 0
    assert out.read_text().startswith("## gatekeeper:")
    assert f"wrote {out}" in capsys.readouterr().out
    # the FileStore as history: one earlier run is enough for a latency baseline
    base = write_pipeline(tmp_path / "base", pipeline(environment(), started_at=day(1)))
    html = tmp_path / "report.html"
    argv = ["report", "--artifacts", str(artifacts), "--history", str(base), "--out", str(html)]
    assert cli.main(argv) == 0
    if HAVE_MATPLOTLIB:
        assert "Latency distribution: this run vs baseline" in html.read_text()


@pytest.mark.parametrize(
    ("setup", "argv_extra", "expect"),
    [
        ("bad_verdict", [], r"verdict\.json:3:1: invalid JSON"),
        ("bad_analysis", [], r"analysis\.json:1:2: invalid JSON"),
        ("", ["--runs", "1"], r"--runs: must be at least 2"),
        ("", ["--history", "nosuch:x"], r"unknown baseline store 'nosuch'"),
    ],
)
def test_cli_report_bad_input_is_one_line_and_no_file(
    artifacts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, argv_extra: list[str], expect: str
) -> None:
    if setup == "bad_verdict":
        (artifacts / "verdict.json").write_text('{\n "result": "pass",\n')
    if setup == "bad_analysis":
        (artifacts / "analysis.json").write_text("{oops")
    out = tmp_path / "report.html"
    assert cli.main(["report", "--artifacts", str(artifacts), "--out", str(out), *argv_extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert re.search(expect, err), err
    assert not out.exists()


def test_a_verdicts_pipeline_url_is_a_link_only_when_it_is_http(artifacts: Path) -> None:
    # 2026-12-04 audit: the report linked the verdict file's context.pipeline_url as it was: a javascript: or
    # data: URL became the page's "pipeline" link (only the page's CSP stood between it and a click). Links go
    # through escape.html_url now (http(s) only), as markdown links go through md_url.
    doc = json.loads((artifacts / "verdict.json").read_text())
    for url, shown in (
        ("javascript:alert(document.domain)", False),
        ("data:text/html,<script>alert(1)</script>", False),
        ("https://gitlab.example.com/p/-/pipelines/5?a=1&b=2", True),
    ):
        doc["context"] = {**doc.get("context", {}), "pipeline_url": url}
        (artifacts / "verdict.json").write_text(json.dumps(doc))
        html = render_html(collect(artifacts), plots=[])
        assert "javascript:" not in html
        assert "data:text/html" not in html
        assert (">pipeline</a>" in html) is shown, url
    assert 'href="https://gitlab.example.com/p/-/pipelines/5?a=1&amp;b=2"' in html
