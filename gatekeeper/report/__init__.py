"""The release manager's report of one pipeline: HTML (self-contained) or markdown.

``write_report`` is the library side of ``gatekeeper report``: collect the data,
render it, write it atomically.
"""

from __future__ import annotations

from pathlib import Path

from gatekeeper.core import files
from gatekeeper.core.errors import InputError

__all__ = ["FORMATS", "write_report"]

FORMATS = ("html", "md")


def write_report(
    *,
    artifacts: Path,
    out: Path,
    fmt: str = "html",
    history: str | None = None,
    baseline: str | None = None,
    limit: int = 10,
) -> Path:
    from gatekeeper.report.data import collect

    if fmt not in FORMATS:
        raise InputError(None, "--format", f"unknown format {fmt!r}", f"use one of: {', '.join(FORMATS)}")
    if limit < 2:
        raise InputError(None, "--runs", f"must be at least 2 (got {limit})", "a trend needs two runs, e.g. --runs 10")
    data = collect(Path(artifacts), history=history, baseline=baseline, limit=limit)
    if fmt == "md":
        from gatekeeper.report.markdown import render_markdown

        text = render_markdown(data)
    else:
        from gatekeeper.report.html import render_html

        text = render_html(data)
    return files.atomic_write(out, text)
