"""The anchor: the fixed run a ``compare: anchor`` gate measures drift against, so that a regression that
creeps in below every night-to-night threshold still adds up to a failure.

Which run, for a stage and a run like this one (same channel and device, a comparable configuration):

1. the newest run a release manager set (``gatekeeper history anchor --set RUN --by NAME --reason TEXT``),
   or the newest release (a run recorded by a tag pipeline), whichever of the two came later;
2. else the oldest run inside the window: of the runs of the last ``days`` days, the ``runs`` newest
   (30 days and 20 runs unless gates.yaml's ``anchor:`` says otherwise).

Only records whose run passed (verdict pass or warn) count, as for a baseline. Nothing else moves the
anchor: a run that passes does not, and a blocked run is never recorded as one.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from gatekeeper.contract.stage_report import StageReport
from gatekeeper.history.baseline import BASELINE_VERDICTS, BaselineStore, RunInfo, comparability

__all__ = ["WINDOW_DAYS", "WINDOW_RUNS", "Anchor", "find_anchor"]

WINDOW_DAYS = 30
WINDOW_RUNS = 20
_SCAN = 500  # history records read to find a release or the window's oldest run

Source = Literal["set", "release", "window"]


@dataclass(frozen=True)
class Anchor:
    info: RunInfo
    report: StageReport
    source: Source
    set_by: str | None = None
    reason: str | None = None
    set_at: str | None = None

    def describe(self) -> str:
        """``run sqlite:4 (branch main, commit abc, from DATE), set by ann on DATE: why``, in words."""
        what = {
            "set": f"set by {self.set_by} on {self.set_at}: {self.reason}",
            "release": f"the last release ({self.info.tag})",
            "window": "the oldest run in the anchor window",
        }[self.source]
        return f"{self.info.describe()}; {what}"

    def to_dict(self) -> dict[str, Any]:
        out = self.info.to_dict()
        out.pop("stack", None)
        out |= {"source": self.source, "set_by": self.set_by, "reason": self.reason, "set_at": self.set_at}
        return out


def find_anchor(
    store: BaselineStore,
    stage: str,
    like: StageReport,
    *,
    now: dt.datetime,
    branch: str | None = None,
    days: int = WINDOW_DAYS,
    runs: int = WINDOW_RUNS,
) -> tuple[Anchor | None, str]:
    """The anchor of ``stage`` for a run like ``like``, or None and why there is none."""
    records = [
        (info, report)
        for info, report in store.history(stage, channel=like.environment.channel, limit=_SCAN)
        if report.status == "passed"
        and (info.verdict is None or info.verdict in BASELINE_VERDICTS)
        and comparability(report, like) is None
    ]  # newest first
    chosen = _set_anchor(store, stage, like)
    release = next(((i, r) for i, r in records if i.tag), None)
    if release is not None and (chosen is None or (release[0].recorded_at or "") > (chosen.set_at or "")):
        return Anchor(release[0], release[1], "release"), ""
    if chosen is not None:
        return chosen, ""
    since = (now - dt.timedelta(days=days)).isoformat(timespec="seconds")
    window = [(i, r) for i, r in records if (i.recorded_at or "") >= since and (not branch or i.ref == branch)]
    window = window[:runs]
    if not window:
        on = f" of branch {branch}" if branch else ""
        return None, f"no passed {stage} run{on} comparable with this one in the last {days} days (no anchor yet)"
    info, report = window[-1]
    return Anchor(info, report, "window"), ""


def _set_anchor(store: BaselineStore, stage: str, like: StageReport) -> Anchor | None:
    """The newest anchor set on purpose for this channel and device whose run has a comparable ``stage``."""
    from gatekeeper.history.sql import SqlStore

    if not isinstance(store, SqlStore):
        return None  # only the SQL stores keep anchors
    env = like.environment
    for mark in store.anchors():  # newest first
        if (mark.channel, mark.device_kind, mark.arch) != (env.channel, env.device_kind, env.arch):
            continue
        for info, report in store.anchor_records(mark):
            if report.stage == stage and comparability(report, like) is None:
                return Anchor(info, report, "set", mark.set_by, mark.reason, mark.set_at)
    return None
