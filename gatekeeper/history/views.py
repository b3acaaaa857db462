"""What ``gatekeeper history changes`` and ``gatekeeper history anchor`` show, as text (table, markdown) or
JSON. Every value from the store is escaped for its format: a ref or an image name is recorded input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import md_code_block, md_text, terminal, terminal_lines
from gatekeeper.history import open_store
from gatekeeper.history.sql import SqlStore

__all__ = ["anchors_report", "changes_report", "platforms_report", "set_anchor", "sql_store"]


def sql_store(spec: str, *, create: bool = False) -> SqlStore:
    """The SQL store ``spec`` names (what every ``history`` view and ``bisect --since-change`` read); another
    kind of store keeps no series: an InputError naming the fix."""
    store = open_store(spec, create=create)
    if not isinstance(store, SqlStore):
        kind = spec.split(":", 1)[0]
        hint = "use a sqlite:PATH or postgresql:// store (gatekeeper history import copies one into it)"
        raise InputError(None, "--history", f"{kind}: stores keep no history series", hint)
    return store


def changes_report(
    *, history: str, metric: str | None = None, channel: str | None = None, since: str | None = None, fmt: str = "table"
) -> tuple[str, list[str]]:
    """The change points of every series, and the records that could not be read (for warnings)."""
    from gatekeeper.history.changes import find_changes

    store = sql_store(history)
    if since:
        _check_date(since)
    rows = store.series(channel=channel, since=since, summaries=True)
    skipped = list(store.skipped)
    changes = find_changes(rows, metric=metric, marks=store.anchors())
    groups = _by_series(rows) if changes else {}
    docs = [c.to_dict() | {"platforms": _elsewhere(c, groups)} for c in changes]
    if fmt == "json":
        return json.dumps({"runs": len(rows), "changes": docs}, indent=1) + "\n", skipped
    if fmt == "md":
        return _markdown(docs, len(rows)), skipped
    return _table(docs, len(rows)), skipped


def _by_series(rows: Sequence[Any]) -> dict[Any, list[Any]]:
    """The rows of each series across platforms, with more than one platform (``history platforms``)."""
    from gatekeeper.history.platforms import platforms_of, series_key

    groups: dict[Any, list[Any]] = {}
    for row in rows:
        groups.setdefault(series_key(row), []).append(row)
    return {k: v for k, v in groups.items() if len(platforms_of(v)) > 1}


def _elsewhere(change: Any, groups: dict[Any, list[Any]]) -> dict[str, Any] | None:
    """The change judged on every platform of its series (``gatekeeper history platforms``), or None."""
    from gatekeeper.history.platforms import across_platforms, series_key

    rows = groups.get(series_key(change.first))
    found = across_platforms(rows, change.before, change.first, f"{change.stage}.{change.metric}") if rows else None
    return found.to_dict() if found else None


def _shown(lines: Sequence[str]) -> str:
    """Lines for a terminal, each one line whatever its values hold: a recorded ref, commit, image or reason with
    a newline in it would start a line of its own (a forged ``  bisect: curl … | sh`` under a real change)."""
    return terminal_lines(lines) + "\n"


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
            *(
                [f"  on every platform at these commits: {d['platforms']['call']}: {d['platforms']['why']}"]
                if d["platforms"]
                else []
            ),
            *[f"  bisect: {command}" for command in d["bisect"]],
        ]
    return _shown(lines)


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
        "| metric | change [95% CI], p | series | first run after | stack changed | other platforms | confirmed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for d in docs:
        elsewhere = f"{d['platforms']['call']}: {d['platforms']['why']}" if d["platforms"] else "none recorded"
        cells = [f"{d['stage']}.{d['metric']}", _size(d), _series(d), _first(d), _stack(d), elsewhere]
        lines.append("| " + " | ".join(md_text(c) for c in cells) + f" | {'yes' if d['confirmed'] else 'no'} |")
    bisect = [c for d in docs for c in d["bisect"]]
    if bisect:
        lines += ["", "Next, which change it was:", "", md_code_block(bisect, "sh")]
    return "\n".join(lines) + "\n"


def platforms_report(
    *,
    history: str,
    commit: str,
    base: str | None = None,
    metric: str | None = None,
    channel: str | None = None,
    min_effect: float = 0.02,
    fmt: str = "table",
) -> tuple[str, list[str]]:
    """``gatekeeper history platforms``: did the metrics move between two commits on every platform or on
    some only (``gatekeeper.history.platforms``); with the records that could not be read, for warnings."""
    from gatekeeper.history.platforms import platform_triage
    from gatekeeper.history.postgres import redact_url

    if not 0 < min_effect < 1:
        raise InputError(None, "--min-effect", f"{min_effect:g} is not a fraction", "give one such as 0.02 (2%)")
    store = sql_store(history)
    rows = store.series(channel=channel, summaries=True)
    skipped = list(store.skipped)
    triage = platform_triage(
        rows, commit=commit, base=base, metric=metric, min_effect=min_effect, store=redact_url(history), skipped=skipped
    )
    if fmt == "json":
        return json.dumps(triage.to_dict(), indent=1) + "\n", skipped
    shown = [f.to_dict() for f in triage.findings if f.call != "no change"]
    same = len(triage.findings) - len(shown)
    if fmt == "md":
        return _platforms_md(triage.head, shown, same, triage.unmatched), skipped
    return _platforms_table(triage.head, shown, same, triage.unmatched), skipped


def _platform_lines(d: dict[str, Any]) -> list[str]:
    out = []
    for p in d["platforms"]:
        size = f"{_pct(p['change'])} [{_pct(p['ci'][0])}, {_pct(p['ci'][1])}] p={p['p_value']:.2g}"
        runs = f"{_run_name(p['base_run'])} -> {_run_name(p['head_run'])}"
        runs += f" ({p['runs_before']} run(s) before, {p['runs_after']} after, unit: {p['unit']})"
        stack = "; ".join(f"{s['component']} {s['before']} -> {s['after']}" for s in p["stack_changes"])
        out.append(f"{p['platform']}: {p['direction']} {size}, {runs}; stack changed: {stack or 'nothing'}")
    return out


def _run_name(run: dict[str, Any]) -> str:
    name = f"pipeline {run['pipeline_id']}" if run.get("pipeline_id") else f"record {run['run_id']}"
    return f"{name} ({str(run.get('commit') or '')[:12]})"


def _platforms_table(head: str, docs: Sequence[dict[str, Any]], same: int, unmatched: Sequence[str]) -> str:
    lines = [f"commit {head[:12]}: {len(docs)} metric(s) moved on a platform, {same} equivalent on every one"]
    for d in docs:
        lines += ["", f"{d['stage']}.{d['metric']} [{d['channel']}, model {d['model']}]: {d['call']}", f"  {d['why']}"]
        lines += [f"  {line}" for line in _platform_lines(d)]
    lines += [f"not compared: {u}" for u in unmatched]
    return _shown(lines)


def _platforms_md(head: str, docs: Sequence[dict[str, Any]], same: int, unmatched: Sequence[str]) -> str:
    lines = [
        f"**commit {md_text(head[:12])}**: {len(docs)} metric(s) moved on a platform, {same} equivalent on every one",
        "",
    ]
    if docs:
        lines += ["| metric | call | why | per platform |", "| --- | --- | --- | --- |"]
        for d in docs:
            per = "<br>".join(md_text(line) for line in _platform_lines(d))
            lines.append(f"| {md_text(d['stage'] + '.' + d['metric'])} | {d['call']} | {md_text(d['why'])} | {per} |")
    lines += [f"- not compared: {md_text(u)}" for u in unmatched]
    return "\n".join(lines) + "\n"


def anchors_report(*, history: str, fmt: str = "table") -> str:
    """Every anchor set, newest first, as waivers are shown: the run, who, when and why."""
    store = sql_store(history)
    marks = store.anchors()
    if fmt == "json":
        return json.dumps({"anchors": [m.to_dict() for m in marks]}, indent=1) + "\n"
    if not marks:
        return "no anchor set: compare: anchor gates use the last release, else the oldest run of the window\n"
    lines = [f"{len(marks)} anchor(s) set, newest first (the newest per channel and device applies):"]
    for m in marks:
        device = m.device_kind if m.arch in (None, m.device_kind) else f"{m.device_kind} {m.arch}"
        lines.append(f"- run {m.run} ({m.channel}, {device}): set by {m.set_by} on {m.set_at}: {m.reason}")
    return _shown(lines)


def set_anchor(*, history: str, run: str, by: str, reason: str) -> str:
    store = sql_store(history)
    mark = store.set_anchor(run, by=by, reason=reason)
    return terminal(
        f"gatekeeper: anchor set: run {mark.run} ({mark.channel}, {mark.device_kind} {mark.arch}) by {mark.set_by} "
        f"on {mark.set_at}: {mark.reason}",
        newlines=False,
    )
