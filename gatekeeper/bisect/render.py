"""The bisection as text: one row per candidate tried, then the answer and what changed."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

__all__ = ["changes_lines", "table_lines"]

MAX_REASON = 90


def _measured(c: Mapping[str, Any]) -> str:
    """The bisected metric's median over the candidate's processes, or the last exit code."""
    rounds = c["rounds"]
    if not rounds:
        return ""
    medians = [x for r in rounds for m in (r.get("metrics") or {}).values() for x in m.get("process_medians", [])]
    units = [m.get("unit", "") for r in rounds for m in (r.get("metrics") or {}).values()]
    if medians:
        return f"{statistics.median(medians):.4g} {units[0] if units else ''}".strip()
    return f"exit {rounds[-1]['exit_code']}" if rounds[-1]["exit_code"] is not None else rounds[-1]["outcome"]


def table_lines(doc: Mapping[str, Any]) -> list[str]:
    """Every candidate that was tried (or could not be), in range order."""
    rows = [("#", "candidate", "decision", "processes", "measured", "why")]
    for c in doc["candidates"]:
        if c["state"] == "untried":
            continue
        decisions = c["decisions"]
        last = decisions[-1] if decisions else None
        if c["state"] == "unavailable":
            decision, why = "skipped", c.get("unavailable") or ""
        elif last is None:
            decision, why = "-", "measured, not decided"
        else:
            decision, why = last["decision"], last["reason"]
        processes = sum(r.get("processes") or 1 for r in c["rounds"])
        why = " ".join(str(why).split())
        why = why if len(why) <= MAX_REASON else why[: MAX_REASON - 3] + "..."
        rows.append((str(c["index"]), c["label"], decision, str(processes or ""), _measured(c), why))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return ["  ".join(r[i].ljust(widths[i]) for i in range(5)) + "  " + r[5] for r in rows]


def changes_lines(changes: Mapping[str, Any], *, limit: int = 12) -> list[str]:
    """What changed between the last good and the first bad candidate, a few lines."""
    kind = changes.get("kind")
    out: list[str] = []
    if kind == "commits":
        commits = changes.get("commits") or []
        out.append(f"{len(commits)}{'+' if changes.get('more_commits') else ''} commit(s):")
        out += [f"  {c.get('sha', '')[:10]} {c.get('subject', '')}" for c in commits[:limit]]
    elif kind == "versions":
        out.append(f"{changes.get('package')} {changes.get('from')} -> {changes.get('to')}")
        for name, d in list((changes.get("installed") or {}).items())[:limit]:
            out.append(f"  {name}: {d.get('from') or '-'} -> {d.get('to') or '-'}")
    elif kind == "images":
        digests = changes.get("digests") or {}
        out.append(f"{changes.get('from')} -> {changes.get('to')}")
        out.append(f"  digest {digests.get('from') or '?'} -> {digests.get('to') or '?'}")
        for key in ("env", "labels", "packages"):
            for name, d in list((changes.get(key) or {}).items())[:limit]:
                out.append(f"  {key} {name}: {d.get('from') or '-'} -> {d.get('to') or '-'}")
    elif changes.get("error"):
        out.append(f"what changed could not be read: {changes['error']}")
    return out
