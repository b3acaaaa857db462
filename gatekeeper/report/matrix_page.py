"""The version matrix rendered as markdown, self-contained HTML and CSV."""

from __future__ import annotations

import csv
import datetime as dt
import io
from pathlib import Path

from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import csv_cell, html_url, md_text, md_url
from gatekeeper.core.escape import html_text as escape
from gatekeeper.history import BaselineStore, open_store
from gatekeeper.release.matrix import Cell, Column, Matrix, Row, build_matrix, releases_shown
from gatekeeper.release.releases import Lifecycle, MatrixFile, load_matrix_file

__all__ = ["to_csv", "to_html", "to_markdown"]

_ICON = {"pass": "✅", "warn": "⚠️", "blocked": "⛔", "passed": "✅", "failed": "❌"}  # not a password  # nosec B105
_STAGE_NOTE = "* no gate verdict was recorded for this run: the cell shows its stage statuses"


def _flags(life: Lifecycle, extra: list[str] | None = None) -> str:
    flags = life.flags() + (extra or [])
    return f"⚠ {', '.join(flags)}" if flags else ""


def _row_label(row: Row) -> str:
    return f"{row.torch} ({row.channel})"


def _col_extra(col: Column) -> list[str]:
    if col.arch_eol and col.arch_past_eol:
        return [f"{col.arch} past EOL since {col.arch_eol.eol}"]
    return []


def _cell_text(cell: Cell) -> str:
    star = "" if cell.from_verdict else "*"
    return f"{_ICON.get(cell.verdict, '?')} {cell.verdict}{star} {cell.date}"


def _lifecycle_rows(m: Matrix) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    for kind, r in releases_shown(m):
        status = "—"
        if r.eol:
            status = (
                "past EOL"
                if r.eol < m.today
                else ("EOL soon" if (r.eol - m.today).days <= m.spec.eol_warning_days else "supported")
            )
        cves = ", ".join(f"{c.id}" + (f" (fixed in {c.fixed_in})" if c.fixed_in else "") for c in r.cves)
        rows.append((f"{kind} {r.version}", str(r.released or "—"), str(r.eol or "—"), status, cves or "—", r.notes))
    for a in m.spec.archs:
        status = "—" if a.eol is None else ("past EOL" if a.eol < m.today else "supported")
        notes = "; ".join(x for x in (a.gpus, a.notes) if x)
        rows.append((f"GPU {a.name}", "—", str(a.eol or "—"), status, "—", notes))
    return rows


def to_markdown(m: Matrix) -> str:
    lines = [f"# Version matrix ({m.today})", ""]
    lines += [f"> {md_text(n)}" for n in m.notes]  # a left-out record is named by its recorded ref and commit
    if m.notes:
        lines.append("")
    if m.rows:
        # versions, archs, verdicts and pipeline ids are a history record's strings (any job that records, or an
        # imported line, writes them): each is escaped as markdown (md_text escapes "|" too), links only http(s)
        header = ["torch (channel)"] + [
            md_text(f"{c.label} {_flags(c.life, _col_extra(c))}".strip()) for c in m.columns
        ]
        lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        for i, row in enumerate(m.rows):
            label = f"{md_text(row.torch)} ({md_text(row.channel)}) {md_text(_flags(row.life))}"
            cells = [label.strip()]
            for j in range(len(m.columns)):
                cell = m.cells.get((i, j))
                if cell is None:
                    cells.append("—")
                    continue
                star = "" if cell.from_verdict else "*"
                text = f"{_ICON.get(cell.verdict, '?')} {md_text(cell.verdict)}{star} {md_text(cell.date)}"
                url = md_url(cell.link)
                ref = f"#{md_text(cell.pipeline_id)}" if cell.pipeline_id else "report"
                cells.append(f"{text} [{ref}]({url})" if url else text)
            lines.append("| " + " | ".join(cells) + " |")
        if any(not c.from_verdict for c in m.cells.values()):
            lines += ["", _STAGE_NOTE]
    life = _lifecycle_rows(m)
    if life:
        lines += ["", f"## Releases (from {m.spec.path})", "", "| release | released | EOL | status | CVEs | notes |"]
        lines += ["| --- | --- | --- | --- | --- | --- |"]
        # the notes are matrix.yaml's free text (a merge request can change the file): escaped as markdown
        for entry in life:
            cells = [*(x.replace("|", "\\|") for x in entry[:-1]), md_text(entry[-1])]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,"DejaVu Sans",sans-serif;margin:1rem auto;max-width:1400px;color:#1f2937}
table{border-collapse:collapse;font-size:.85rem;margin:.6rem 0}th,td{border:1px solid #d1d5db;padding:.3rem .5rem}
th{background:#f3f4f6;text-align:left}td.pass,td.passed{background:#dcfce7}td.warn{background:#fef9c3}
td.blocked,td.failed{background:#fee2e2}.flag{color:#b91c1c;font-size:.78rem;display:block}.note{color:#92400e}
.meta{color:#6b7280;font-size:.8rem}"""


def to_html(m: Matrix) -> str:
    body = [f"<h1>Version matrix ({escape(str(m.today))})</h1>"]
    body += [f'<p class="note">{escape(n)}</p>' for n in m.notes]
    if m.rows:
        head = "".join(
            f"<th>{escape(c.label)}<span class='flag'>{escape(_flags(c.life, _col_extra(c)))}</span></th>"
            for c in m.columns
        )
        body.append(f"<table><thead><tr><th>torch (channel)</th>{head}</tr></thead><tbody>")
        for i, row in enumerate(m.rows):
            tds = []
            for j in range(len(m.columns)):
                cell = m.cells.get((i, j))
                if cell is None:
                    tds.append("<td>—</td>")
                    continue
                text = escape(_cell_text(cell))
                url = html_url(cell.link)  # only an http(s) URL becomes a link
                if url:
                    ref = escape(f"#{cell.pipeline_id}" if cell.pipeline_id else "report")
                    text += f' <a href="{url}">{ref}</a>'
                elif cell.pipeline_id:
                    text += escape(f" #{cell.pipeline_id}")
                tds.append(f'<td class="{escape(cell.verdict)}">{text}</td>')
            label = f"{escape(_row_label(row))}<span class='flag'>{escape(_flags(row.life))}</span>"
            body.append(f"<tr><th>{label}</th>{''.join(tds)}</tr>")
        body.append("</tbody></table>")
        if any(not c.from_verdict for c in m.cells.values()):
            body.append(f'<p class="meta">{escape(_STAGE_NOTE)}</p>')
    life = _lifecycle_rows(m)
    if life:
        body.append(f"<h2>Releases (from {escape(str(m.spec.path))})</h2><table><thead><tr>")
        body.append("".join(f"<th>{h}</th>" for h in ("release", "released", "EOL", "status", "CVEs", "notes")))
        body.append("</tr></thead><tbody>")
        for entry in life:
            cls = ' class="failed"' if entry[3] == "past EOL" else (' class="warn"' if entry[3] == "EOL soon" else "")
            body.append(
                "<tr>" + "".join(f"<td{cls if k == 3 else ''}>{escape(x)}</td>" for k, x in enumerate(entry)) + "</tr>"
            )
        body.append("</tbody></table>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>Version matrix</title><style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


CSV_COLUMNS = (
    "torch",
    "channel",
    "platform",
    "arch",
    "verdict",
    "verdict_source",
    "date",
    "pipeline_id",
    "commit",
    "report_url",
    "torch_eol",
    "torch_past_eol",
    "torch_cves",
    "rocm_eol",
    "rocm_past_eol",
    "rocm_cves",
    "arch_eol",
    "arch_past_eol",
)


def to_csv(m: Matrix) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for (i, j), cell in sorted(m.cells.items()):
        row, col = m.rows[i], m.columns[j]
        t, r = row.life, col.life
        w.writerow(
            csv_cell(v)  # a record's strings: no cell starts a spreadsheet formula
            for v in (
                row.torch,
                row.channel,
                col.platform,
                col.arch,
                cell.verdict,
                "verdict" if cell.from_verdict else "stage status",
                cell.date,
                cell.pipeline_id or "",
                cell.commit or "",
                cell.link or "",
                (t.release.eol if t.release and t.release.eol else "") or "",
                str(t.past_eol).lower(),
                " ".join(c.id for c in t.cves),
                (r.release.eol if r.release and r.release.eol else "") or "",
                str(r.past_eol).lower(),
                " ".join(c.id for c in r.cves),
                (col.arch_eol.eol if col.arch_eol and col.arch_eol.eol else "") or "",
                str(col.arch_past_eol).lower(),
            )
        )
    return buf.getvalue()


def write_matrix(
    *,
    history: str | None,
    matrix_file: Path | None,
    out: Path,
    limit: int = 1000,
    today: dt.date | None = None,
    store: BaselineStore | None = None,
) -> list[Path]:
    """matrix.md, matrix.html and matrix.csv in ``out``; all rendered before any is written."""
    if limit < 1:
        raise InputError(None, "--limit", f"must be at least 1 (got {limit})", "e.g. --limit 1000")
    if matrix_file is None and Path("matrix.yaml").is_file():
        matrix_file = Path("matrix.yaml")
    spec = load_matrix_file(matrix_file) if matrix_file is not None else MatrixFile()
    if store is None and history:
        store = open_store(history)
    matrix = build_matrix(store, spec, today=today or dt.datetime.now(dt.timezone.utc).date(), limit=limit)
    rendered = {"matrix.md": to_markdown(matrix), "matrix.html": to_html(matrix), "matrix.csv": to_csv(matrix)}
    return [files.atomic_write(Path(out) / name, text) for name, text in rendered.items()]
