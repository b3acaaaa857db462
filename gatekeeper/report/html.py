"""The self-contained HTML report: one file, inline CSS and SVG, no scripts, no network.

It must open straight from a CI artifact link, so nothing is fetched: no fonts,
no stylesheets, no JavaScript libraries.
"""

from __future__ import annotations

from gatekeeper.contract.analysis import Analysis
from gatekeeper.core.escape import html_text as escape
from gatekeeper.core.escape import html_url
from gatekeeper.evaluate.point_gates import split_results
from gatekeeper.report import tables
from gatekeeper.report.data import ReportData
from gatekeeper.report.plots import Plot, matplotlib_missing, report_plots

__all__ = ["render_html"]

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;max-width:1200px;
padding:1.2rem;color:#1f2937;background:#fff;line-height:1.4}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.15rem;margin-top:1.8rem;border-bottom:1px solid #e5e7eb}
.banner{padding:.9rem 1.1rem;border-radius:8px;margin:.8rem 0;font-size:1.05rem}
.banner strong{font-size:1.3rem;margin-right:.6rem}
.r-pass{background:#dcfce7;border:1px solid #16a34a}.r-warn{background:#fef9c3;border:1px solid #ca8a04}
.r-blocked{background:#fee2e2;border:1px solid #dc2626}.r-none{background:#f3f4f6;border:1px solid #6b7280}
table{border-collapse:collapse;width:100%;font-size:.86rem;margin:.4rem 0}
th,td{border:1px solid #e5e7eb;padding:.3rem .45rem;text-align:left;vertical-align:top}
th{background:#f9fafb}td.num{text-align:right;white-space:nowrap}
tr.blocking td{background:#fee2e2}tr.fail td{background:#fff1f2}tr.warn td,tr.inconclusive td{background:#fefce8}
tr.waived td,tr.skipped td{color:#6b7280}
.notes{color:#92400e;background:#fffbeb;border:1px solid #fcd34d;border-radius:6px;padding:.4rem .9rem}
.diag{border:1px solid #fca5a5;border-radius:6px;padding:.5rem .9rem;margin:.6rem 0;background:#fff7f7}
code,pre{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.82rem}
pre{background:#f3f4f6;padding:.5rem;overflow-x:auto;white-space:pre-wrap}
figure{margin:.8rem 0}figure svg{width:100%;max-width:960px;height:auto}
td:first-child{white-space:nowrap}.meta{color:#6b7280;font-size:.85rem}
"""

_NUMERIC = {"value", "baseline", "change", "cases", "passed", "pass rate", "duration"}


def _table(t: tables.Table, *, caption: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in t.header) if any(t.header) else ""
    out = [f"<table>{f'<caption>{escape(caption)}</caption>' if caption else ''}"]
    if head:
        out.append(f"<thead><tr>{head}</tr></thead>")
    out.append("<tbody>")
    for i, row in enumerate(t.rows):
        cls = t.classes[i] if i < len(t.classes) and t.classes[i] else ""
        cells = "".join(
            f'<td class="num">{escape(c)}</td>' if t.header[j] in _NUMERIC else f"<td>{escape(c)}</td>"
            for j, c in enumerate(row)
        )
        out.append(f'<tr class="{escape(cls)}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _diagnosis(d: Analysis) -> str:
    known = f" — known issue <strong>{escape(d.known_issue)}</strong>" if d.known_issue else " — not a known issue"
    parts = [f'<div class="diag"><h3>{escape(d.category)}{known}</h3>']
    if d.source:
        parts.append(f'<p class="meta">from {escape(d.source)}</p>')
    if d.explanation:
        parts.append(f"<p>{escape(d.explanation)}</p>")
    if d.matches:
        lines = "\n".join(
            f"{'' if m.line is None else f'{m.line}: '}{m.text}" + (f"    [{m.rule}]" if m.rule else "")
            for m in d.matches[:20]
        )
        parts.append(f"<p>Matched log lines:</p><pre>{escape(lines)}</pre>")
    if d.remediation:
        parts.append("<p>What to try:</p><ol>" + "".join(f"<li>{escape(r)}</li>" for r in d.remediation) + "</ol>")
    parts.append("</div>")
    return "".join(parts)


def _banner(data: ReportData) -> str:
    v = data.verdict
    if v is None:
        return (
            '<div class="banner r-none"><strong>NO VERDICT</strong>'
            "the gates were not evaluated for these artifacts; the stages are shown below.</div>"
        )
    where = ""
    ctx = v.context
    if ctx.get("tag") or ctx.get("mr_iid") or ctx.get("ref"):
        place = ctx.get("tag") or (
            f"!{ctx['mr_iid']} into {ctx.get('target_branch')}" if ctx.get("mr_iid") else ctx.get("ref")
        )
        where = f" · {escape(str(place))}"
    url = html_url(ctx.get("pipeline_url"))  # the verdict file's: only an http(s) URL becomes a link
    link = f' · <a href="{url}">pipeline</a>' if url else ""
    return (
        f'<div class="banner r-{escape(v.result)}"><strong>{escape(tables.headline(data))}</strong>'
        f'{escape(v.summary)}<div class="meta">channel {escape(v.channel)}{where}{link} · '
        f"evaluated {escape(v.generated_at)} against {escape(v.gates_file or 'gates.yaml')}</div></div>"
    )


def render_html(data: ReportData, plots: list[Plot] | None = None) -> str:
    """The whole page. ``plots`` defaults to every plot the data supports (none without matplotlib)."""
    missing = matplotlib_missing()
    if plots is None:
        plots = [] if missing else report_plots(data)
    env = data.environment
    title = f"gatekeeper report: {tables.headline(data)}"
    if env is not None:
        title += f" · torch {env.torch_version or '?'} · {env.device_kind} {env.arch or ''}".rstrip()
    body = [f"<h1>{escape(title)}</h1>", _banner(data)]
    notes = list(data.notes)
    if missing:
        notes.append(missing)
    if notes:
        body.append('<div class="notes"><ul>' + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul></div>")
    if data.verdict is not None:
        plain, points = split_results(data.verdict.gates)
        body += ["<h2>Gates</h2>", _table(tables.gate_table(plain))] if plain or not points else ["<h2>Gates</h2>"]
        for caption, sweep in tables.sweep_tables(points):  # gates on metric[*]: one row per point
            body += [f"<h3>{escape(caption)}</h3>", _table(sweep)]
        if data.verdict.waived_checks:
            rows = tables.Table(
                ("check", "waiver", "owner", "expires"),
                tuple(
                    (
                        f"{w.stage}.{w.check}",
                        str(w.waiver.get("reason", "")),
                        str(w.waiver.get("owner", "")),
                        str(w.waiver.get("expires", "")),
                    )
                    for w in data.verdict.waived_checks
                ),
            )
            body += ["<h3>Waived checks</h3>", _table(rows)]
    if data.diagnoses:
        body.append("<h2>Failure diagnosis</h2>")
        body += [_diagnosis(d) for d in data.diagnoses]
    categories = tables.category_table(data)
    if categories is not None:
        body += ["<h2>Operators by category</h2>", _table(categories)]
    if plots:
        body.append("<h2>Plots</h2>")
        body += [f'<figure aria-label="{escape(p.title)}">{p.svg}</figure>' for p in plots]
    changes = tables.change_table(data)
    if changes is not None:
        body += ["<h2>Change points in the trends</h2>", _table(changes)]
    if data.reports:
        body += ["<h2>Stages</h2>", _table(tables.stage_table(dict(data.reports)))]
    env_table = tables.environment_table(env)
    if env_table is not None:
        body += ["<h2>Environment</h2>", _table(env_table)]
    body.append(f'<p class="meta">artifacts: {escape(str(data.artifacts))}</p>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
        # No network: a CSP that forbids every fetch makes an accidental external asset fail loudly in the browser test.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        'img-src data:">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
