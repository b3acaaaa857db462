"""What ``gatekeeper history changes`` and ``gatekeeper history anchor`` show, as text (table, markdown) or
JSON. Every value from the store is escaped for its format: a ref or an image name is recorded input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import md_text, terminal
from gatekeeper.history import open_store
from gatekeeper.history.sql import SqlStore

__all__ = ["anchors_report", "changes_report", "set_anchor"]


def _sql_store(spec: str, *, create: bool = False) -> SqlStore:
    store = open_store(spec, create=create)
    if not isinstance(store, SqlStore):
        kind = spec.split(":", 1)[0]
        hint = "use a sqlite:PATH or postgresql:// store (gatekeeper history import copies one into it)"
        raise InputError(None, "--history", f"{kind}: stores keep no history series", hint)
    return store


def changes_report(
    *, history: str, metric: str | None = None, channel: str | None = None, since: str | None = None, fmt: str = "table"
) -> str:
    from gatekeeper.history.changes import find_changes

    store = _sql_store(history)
    if since:
        _check_date(since)
    rows = store.series(channel=channel, since=since, summaries=True)
    changes = find_changes(rows, metric=metric, marks=store.anchors())
    docs = [c.to_dict() for c in changes]
    if fmt == "json":
        return json.dumps({"runs": len(rows), "changes": docs}, indent=1) + "\n"
    if fmt == "md":
        return _markdown(docs, len(rows))
    return _table(docs, len(rows))


def _check_date(text: str) -> None:
    import datetime as dt

    try:
        dt.date.fromisoformat(text[:10])
    except ValueError:
        raise InputError(None, "--since", f"{text!r} is not a date", "write YYYY-MM-DD") from None


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _size(d: dict[str, Any]) -> str:
    return f"{_pct(d['change'])} [{_pct(d['ci'][0])}, {_pct(d['ci'][1])}] p={d['p_value']:.2g}"


def _first(d: dict[str, Any]) -> str:
    run = d["first_run"]
    parts = [
        f"pipeline {run['pipeline_id']}" if run.get("pipeline_id") else f"record {run['run_id']}",
        f"commit {str(run['commit'])[:12]}" if run.get("commit") else "",
        str(run.get("recorded_at") or ""),
    ]
    return ", ".join(p for p in parts if p)


def _stack(d: dict[str, Any]) -> str:
    return "; ".join(f"{s['component']} {s['before']} -> {s['after']}" for s in d["stack_changes"]) or "none recorded"


def _series(d: dict[str, Any]) -> str:
    device = d["device_kind"] if d["arch"] in (None, d["device_kind"]) else f"{d['device_kind']} {d['arch']}"
    return f"{d['channel']}, {device}, {d.get('branch') or 'any branch'}, model {d.get('model')}"


def _table(docs: Sequence[dict[str, Any]], runs: int) -> str:
    if not docs:
        return f"no change point in {runs} recorded runs\n"
    lines = [f"{len(docs)} change point(s) in {runs} recorded runs:"]
    for d in docs:
        state = "confirmed" if d["confirmed"] else "unconfirmed"
        lines += [
            "",
            f"{d['stage']}.{d['metric']} {_size(d)} ({state}) at run {d['index'] + 1} of {d['runs']} [{_series(d)}]",
            f"  first run after: {_first(d)}",
            f"  stack changed: {_stack(d)}",
            *_span(d),
        ]
    return terminal("\n".join(lines)) + "\n"


def _span(d: dict[str, Any]) -> list[str]:
    """The runs the change may lie at, when more than one, and what changed in the stack there."""
    lo, hi = d.get("span") or (d["index"], d["index"])
    if lo == hi:
        return []
    near = "; ".join(
        f"{s['component']} {s['before']} -> {s['after']} at run {s['index'] + 1}" for s in d["stack_changes_in_span"]
    )
    where = f"  may lie at runs {lo + 1}-{hi + 1} (90% of the likelihood)"
    return [f"{where}; stack changed there: {near or 'nothing else'}"]


def _markdown(docs: Sequence[dict[str, Any]], runs: int) -> str:
    if not docs:
        return f"No change point in {runs} recorded runs.\n"
    lines = [
        f"**{len(docs)} change point(s)** in {runs} recorded runs",
        "",
        "| metric | change [95% CI], p | series | first run after | stack changed | confirmed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in docs:
        cells = [f"{d['stage']}.{d['metric']}", _size(d), _series(d), _first(d), _stack(d)]
        lines.append("| " + " | ".join(md_text(c) for c in cells) + f" | {'yes' if d['confirmed'] else 'no'} |")
    return "\n".join(lines) + "\n"


def anchors_report(*, history: str, fmt: str = "table") -> str:
    """Every anchor set, newest first, as waivers are shown: the run, who, when and why."""
    store = _sql_store(history)
    marks = store.anchors()
    if fmt == "json":
        return json.dumps({"anchors": [m.to_dict() for m in marks]}, indent=1) + "\n"
    if not marks:
        return "no anchor set: compare: anchor gates use the last release, else the oldest run of the window\n"
    lines = [f"{len(marks)} anchor(s) set, newest first (the newest per channel and device applies):"]
    for m in marks:
        device = m.device_kind if m.arch in (None, m.device_kind) else f"{m.device_kind} {m.arch}"
        lines.append(f"- run {m.run} ({m.channel}, {device}): set by {m.set_by} on {m.set_at}: {m.reason}")
    return terminal("\n".join(lines)) + "\n"


def set_anchor(*, history: str, run: str, by: str, reason: str) -> str:
    store = _sql_store(history)
    mark = store.set_anchor(run, by=by, reason=reason)
    return terminal(
        f"gatekeeper: anchor set: run {mark.run} ({mark.channel}, {mark.device_kind} {mark.arch}) by {mark.set_by} "
        f"on {mark.set_at}: {mark.reason}",
        newlines=False,
    )
