"""No alert storms: alert when a job starts failing, when it recovers, and repeat after an interval.

The state is a small JSON file (keep it in the CI cache or a shared volume):
``{"schema": "gatekeeper.alert_state/v1", "jobs": {key: {"failing", "since",
"last_alert", "runs"}}}``. The key is the channel, ref and job, so a broken
nightly on main and a broken MR alert independently.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatekeeper.core import files
from gatekeeper.core.errors import InputError

__all__ = ["STATE_SCHEMA", "Decision", "decide", "load_state", "record", "save_state"]

STATE_SCHEMA = "gatekeeper.alert_state/v1"


@dataclass(frozen=True)
class Decision:
    send: bool
    kind: str  # started | repeat | recovered | suppressed | ok
    reason: str


def _parse(ts: object, now: dt.datetime) -> dt.datetime | None:
    """An aware UTC time, not later than this job's clock; None for anything else (a naive, garbled or future
    time counts as "never alerted": a ``last_alert`` of 9999, which any job with the cache can write, silenced
    every repeat of a failing job's alert for ever)."""
    from gatekeeper.core.budgets import aware_utc

    try:
        return aware_utc(ts, path=None, where="last_alert", not_after=now)
    except InputError:
        return None


def decide(state: dict[str, Any], key: str, *, failing: bool, now: dt.datetime, repeat_after_s: float) -> Decision:
    """What to do for this run, given the stored state (not modified here)."""
    raw = state.get("jobs", {}).get(key)
    job: dict[str, Any] = raw if isinstance(raw, dict) else {}
    was_failing = bool(job.get("failing"))
    if failing and not was_failing:
        return Decision(True, "started", "the job started failing")
    if failing:
        last = _parse(job.get("last_alert"), now)
        if last is None or (now - last).total_seconds() >= repeat_after_s:
            return Decision(
                True, "repeat", f"still failing since {job.get('since')}; repeat after {repeat_after_s:g} s"
            )
        return Decision(
            False, "suppressed", f"still failing since {job.get('since')}; alerted at {job.get('last_alert')}"
        )
    if was_failing:
        return Decision(True, "recovered", f"recovered after failing since {job.get('since')}")
    return Decision(False, "ok", "passing, and it was not failing before")


def record(state: dict[str, Any], key: str, *, failing: bool, now: dt.datetime, alerted: bool) -> dict[str, Any]:
    """The state after this run (a new dict)."""
    jobs = dict(state.get("jobs", {}))
    job = dict(jobs[key]) if isinstance(jobs.get(key), dict) else {}
    if not isinstance(job.get("runs"), int):
        job["runs"] = 0
    if failing and not job.get("failing"):
        job["since"] = now.isoformat(timespec="seconds")
        job["runs"] = 0
    if not failing:
        job.pop("since", None)
        job["runs"] = 0
    job["failing"] = failing
    job["runs"] = int(job.get("runs", 0)) + 1
    if alerted:
        job["last_alert"] = now.isoformat(timespec="seconds")
    jobs[key] = job
    return {"schema": STATE_SCHEMA, "jobs": jobs}


def load_state(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        return {"schema": STATE_SCHEMA, "jobs": {}}
    doc = files.read_json(path, what="alert state file")
    if not isinstance(doc, dict) or doc.get("schema") != STATE_SCHEMA or not isinstance(doc.get("jobs"), dict):
        raise InputError(path, "schema", f"not a {STATE_SCHEMA} file", "delete it to start over")
    return doc


def save_state(path: str | Path, state: dict[str, Any]) -> None:
    files.write_json(path, state)
