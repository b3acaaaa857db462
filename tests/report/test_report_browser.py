"""The HTML report in a real headless Chromium: it loads without console messages
(errors, CSP violations from an external asset, script errors) and renders a
non-empty page. Chromium comes from the system packages (scripts/setup_browser.sh)."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest

from gatekeeper.core import proc
from gatekeeper.evaluate.run import run_evaluate
from gatekeeper.report.data import collect
from gatekeeper.report.html import render_html
from tests.report.test_report import ANALYSIS
from tests.support.release_history import day, environment, pipeline, record, sqlite_store, write_pipeline

ROOT = Path(__file__).resolve().parents[2]
BROWSER = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)

# A skip, which tests/conftest.py turns into a failure under GATEKEEPER_REQUIRE_TOOLS=1 (CI installs chromium).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(BROWSER is None, reason="no chromium on PATH: run scripts/setup_browser.sh (CI does)"),
]

# Chromium logs every console message of the page as "INFO:CONSOLE:<line>] "<text>", source: ...".
_CONSOLE = re.compile(r':CONSOLE(?::\d+|\(\d+\))\] "(.*)", source: (\S*)')


def _load(page: Path, shot: Path, tmp: Path, height: int = 2000) -> tuple[list[str], proc.ProcResult]:
    assert BROWSER is not None
    argv = [
        BROWSER,
        "--headless",
        "--disable-gpu",
        "--no-sandbox",  # containers run as root, where the sandbox cannot start
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        f"--screenshot={shot}",
        f"--window-size=1280,{height}",
        page.as_uri(),
    ]
    result = proc.run(argv, timeout=90, env={**os.environ, "HOME": str(tmp)})
    assert result.ok, f"chromium {result.describe()}: {result.stderr[-2000:]}"
    return [f"{m.group(1)} ({m.group(2)})" for m in _CONSOLE.finditer(result.stderr)], result


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def test_console_errors_are_detected(tmp_path: Path) -> None:
    """The negative control: a page with an external asset and a script error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        'script-src \'unsafe-inline\'"></head><body><img src="https://example.invalid/x.png">'
        "<script>console.error('boom'); notDefined();</script></body></html>"
    )
    messages, _ = _load(bad, tmp_path / "bad.png", tmp_path, height=600)
    assert any("boom" in m for m in messages), messages
    assert any("notDefined" in m for m in messages), messages
    assert any("Content Security Policy" in m for m in messages), messages


def test_report_loads_without_console_errors_and_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = sqlite_store(tmp_path / "hist")
    env = environment()
    for k in range(1, 6):
        record(store, pipeline(env, started_at=day(k)), verdict="pass", pipeline_id=str(k))
    base = write_pipeline(tmp_path / "base", pipeline(env, started_at=day(5)))
    art = write_pipeline(tmp_path / "art", pipeline(env, started_at=day(9), pass_rate=0.88, tail_ms=45.0))
    monkeypatch.chdir(ROOT)  # the verdict names gates.yaml as a user would pass it
    run_evaluate(artifacts=art, gates_path=Path("gates.yaml"), out=art, environ={})
    (art / "analysis.json").write_text(json.dumps(ANALYSIS))
    page = tmp_path / "report.html"
    page.write_text(render_html(collect(art, history_store=store, baseline=str(base))), encoding="utf-8")
    shot = tmp_path / "report.png"
    messages, _ = _load(page, shot, tmp_path)
    assert messages == []
    assert _png_size(shot) == (1280, 2000)
    # a blank 1280x2000 page is a few KB; tables, colours and plots are far more
    assert shot.stat().st_size > 60_000
    if os.environ.get("DOCS_SCREENSHOT"):  # refresh docs/report.png: DOCS_SCREENSHOT=docs/report.png
        shutil.copyfile(shot, os.environ["DOCS_SCREENSHOT"])


def test_matrix_page_loads_without_console_errors(tmp_path: Path) -> None:
    import datetime as dt

    from gatekeeper.report.matrix_page import write_matrix

    store = record(
        sqlite_store(tmp_path / "hist"), pipeline(environment(), started_at=day(2)), verdict="pass", pipeline_id="7"
    )
    write_matrix(history=None, matrix_file=ROOT / "matrix.yaml", out=tmp_path, store=store, today=dt.date(2026, 12, 2))
    messages, _ = _load(tmp_path / "matrix.html", tmp_path / "matrix.png", tmp_path, height=900)
    assert messages == []
    assert _png_size(tmp_path / "matrix.png") == (1280, 900)
