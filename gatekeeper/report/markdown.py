"""The report as GitLab-flavoured markdown for a merge-request note (``--format md``).

The verdict part is the lead's ``render.to_markdown`` (one wording everywhere);
this adds what the report knows beyond the verdict: diagnoses, the operator
table, the trend over earlier runs, the stages and the environment.
"""

from __future__ import annotations

from gatekeeper.core.escape import md_code_block, md_text
from gatekeeper.evaluate.outputs import to_markdown as verdict_markdown
from gatekeeper.report import tables
from gatekeeper.report.data import ReportData, history_points
from gatekeeper.report.plots import TREND_METRICS

__all__ = ["render_markdown"]


def _cell(text: str) -> str:
    # table cells show artifact text (check names, device names): escaped like every markdown output
    return md_text(text)


def _table(t: tables.Table) -> list[str]:
    header = t.header if any(t.header) else ("", "")
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    return lines


def _trend_lines(data: ReportData) -> list[str]:
    rows = []
    for stage, metric in TREND_METRICS:
        points = history_points(data.history.get(stage, ()), metric)
        if len(points) >= 2:
            values = " → ".join(f"{v:.4g}" for _, v in points)
            rows.append((f"{stage}.{metric}", str(len(points)), values))
    if not rows:
        return []
    t = tables.Table(("metric", "runs", "oldest → this run"), tuple(rows))
    return ["", f"**Trend over the last runs** ({data.channel}, same device)", "", *_table(t)]


def render_markdown(data: ReportData) -> str:
    lines: list[str] = []
    if data.verdict is not None:
        lines += verdict_markdown(data.verdict).rstrip().splitlines()
    else:
        lines += ["## gatekeeper: no verdict", "", "The gates were not evaluated for these artifacts."]
    if data.notes:
        lines += ["", *[f"> {md_text(n)}" for n in data.notes]]
    for d in data.diagnoses:  # analysis.json quotes log lines: every piece escaped (tests/security/test_matrix.py)
        known = f"known issue **{md_text(d.known_issue)}**" if d.known_issue else "not a known issue"
        lines += ["", f"**Failure diagnosis: {md_text(d.category)}** ({known})", ""]
        if d.explanation:
            lines += [md_text(d.explanation), ""]
        if d.matches:
            lines += [md_code_block(f"{'' if m.line is None else f'{m.line}: '}{m.text}" for m in d.matches[:10])]
        lines += [f"{i}. {md_text(r)}" for i, r in enumerate(d.remediation, 1)]
    categories = tables.category_table(data)
    if categories is not None:
        lines += ["", "**Operators by category**", "", *_table(categories)]
    lines += _trend_lines(data)
    changes = tables.change_table(data)
    if changes is not None:
        lines += ["", "**Change points in the trends**", "", *_table(changes)]
    if data.reports:
        lines += ["", "<details><summary>Stages and environment</summary>", ""]
        lines += _table(tables.stage_table(dict(data.reports)))
        env = tables.environment_table(data.environment)
        if env is not None:
            lines += ["", *_table(env)]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
