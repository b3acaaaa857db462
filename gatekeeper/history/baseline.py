"""What a baseline is, shared by the registry and every store: the store Protocol, where a record
came from (``RunInfo``), and which stored records may be a run's baseline.

Its own module so that the stores import these from here, not from the registry in
``gatekeeper.history`` that opens them: no import cycle inside the package.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gatekeeper.contract import gpu_state
from gatekeeper.contract.stage_report import Environment, StageReport

__all__ = [
    "BASELINE_VERDICTS",
    "BaselineStore",
    "RunInfo",
    "baseline_branch",
    "beyond_clock",
    "clock_check",
    "comparability",
    "first_comparable",
    "history_noting",
    "read_record",
    "unusable",
]

# Only a run whose gate verdict was one of these may become a baseline (a blocked run never does).
BASELINE_VERDICTS = ("pass", "warn")


@dataclass(frozen=True)
class RunInfo:
    """Where a stage result came from: recorded beside it by stores that keep history."""

    ref: str | None = None  # branch or tag
    commit: str | None = None
    pipeline_id: str | None = None
    verdict: str | None = None  # the gate verdict of that pipeline, when known
    recorded_at: str | None = None
    run_id: str | None = None  # the store's own id of the record (sqlite row, git file, GitLab job)
    tag: str | None = None  # set when the pipeline ran for a tag (a release): such a run may be an anchor
    # what the stage report does not say about the stack: gatekeeper's version, the job's image
    stack: Mapping[str, str | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if out["stack"] is not None:
            out["stack"] = dict(out["stack"])
        return out

    def describe(self) -> str:
        parts = [f"run {self.run_id}" if self.run_id else "", f"branch {self.ref}" if self.ref else ""]
        parts += [
            f"commit {self.commit[:12]}" if self.commit else "",
            f"from {self.recorded_at}" if self.recorded_at else "",
        ]
        return ", ".join(p for p in parts if p) or "no run information"


class BaselineStore(Protocol):
    """One interface for every store; each takes its location as an argument."""

    def latest(self, stage: str, like: StageReport) -> StageReport | None:
        """The newest stored result of ``stage`` comparable with ``like`` (see ``comparability``).

        Every store subclasses this Protocol and inherits this body: ``latest_record`` without the record."""
        found = self.latest_record(stage, like)
        return found[1] if found else None

    def history(
        self, stage: str, *, channel: str | None = None, limit: int = 50
    ) -> Sequence[tuple[RunInfo, StageReport]]:
        """Newest first."""
        ...

    def latest_record(
        self, stage: str, like: StageReport, *, branch: str | None = None
    ) -> tuple[RunInfo, StageReport] | None:
        """Like ``latest``, restricted to ``branch`` (None: any) and to runs whose verdict may be a baseline,
        with where the result came from. Records that cannot be read are skipped and named in ``skipped``."""
        ...

    def save(self, report: StageReport, info: RunInfo) -> None: ...


def history_noting(
    store: BaselineStore, stage: str, notes: list[str], *, channel: str | None = None, limit: int = 50
) -> Sequence[tuple[RunInfo, StageReport]]:
    """``store.history``, and the records it left out (a record that does not read, one dated after this job's
    clock: the store's ``skipped``, reset by each read) added to ``notes`` once each: a report, the version
    matrix and advise say what they could not use rather than leaving it out unsaid."""
    rows = store.history(stage, channel=channel, limit=limit)
    for line in getattr(store, "skipped", ()):  # the directory store reads no records it could skip
        if line not in notes:
            notes.append(str(line))
    return rows


def baseline_branch(environ: Mapping[str, str]) -> str | None:
    """The branch whose results are the baseline: a merge request's target branch, else the protected branch
    (``GATEKEEPER_BASELINE_BRANCH``, ``GATEKEEPER_PROTECTED_BRANCH``, ``CI_DEFAULT_BRANCH``); None outside CI."""
    names = ("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "GATEKEEPER_BASELINE_BRANCH", "GATEKEEPER_PROTECTED_BRANCH")
    for name in (*names, "CI_DEFAULT_BRANCH"):
        if environ.get(name):
            return environ[name]
    return None


def read_record(raw: str | bytes | Mapping[str, Any] | None, where: str) -> tuple[StageReport | None, str | None]:
    """A stored stage result through the same strict reader as an artifact (``contract.stage_report.parse_stage``:
    bounded numbers, schema, finite positive timings): ``(report, None)``, or ``(None, why)`` where ``why`` names
    the field (``where``, the store and row, is for the caller's warning). Every store reads its rows through
    here and skips a bad one with a warning (``skipped``), so a hand-edited or hostile row is never a crash and
    never a baseline."""
    from gatekeeper.contract.stage_report import parse_stage
    from gatekeeper.core import files
    from gatekeeper.core.errors import InputError

    try:
        if raw is None:
            raise InputError(where, "", "no stage result", "record the run again (evaluate --record)")
        doc = raw if isinstance(raw, Mapping) else files.parse_json(raw, where, what="stored stage result")
        return parse_stage(dict(doc), where, what="a stored stage result"), None
    except InputError as err:  # the caller names the record; the reason names the field
        return None, err.problem if not err.where or err.where in err.problem else f"{err.where}: {err.problem}"


def beyond_clock(recorded_at: object, now: dt.datetime, *, field: str = "recorded_at") -> str | None:
    """Why a record's own claim of when it was recorded is not believed, or None.

    Every store orders its records by that claim (the newest is the baseline, the newest release the anchor),
    so a row that says ``9999-12-31`` (or ``z``, which sorts after every digit) was every later run's baseline
    whatever was recorded after it. A claim is believed up to the reading job's clock, with the skew allowance
    of ``budgets.aware_utc``'s ``not_after`` (which reads it); a time without an offset is read as UTC, as the
    stores compare their text. Each store skips such a record with a warning naming it (``skipped``), as one
    that does not read (docs/security.md, "Findings of the 2026-12-04 audit, second pass")."""
    from gatekeeper.core.budgets import aware_utc
    from gatekeeper.core.errors import InputError

    text = recorded_at
    if isinstance(recorded_at, str):
        try:
            parsed = dt.datetime.fromisoformat(recorded_at)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is None:  # 2026-01-01: what a test or an old store wrote
            text = parsed.replace(tzinfo=dt.timezone.utc).isoformat()
    try:
        aware_utc(text, path=None, where=field, not_after=now)
    except InputError as err:
        return f"{field}: {err.problem}" if isinstance(recorded_at, str) else f"no {field}"
    return None


_STORED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")  # the stores' own form: utc_now()


def clock_check(now: dt.datetime, *, field: str = "recorded_at") -> Callable[[object], str | None]:
    """``beyond_clock`` against one clock, for many records: a time in the stores' own form (UTC, to the second)
    is compared as text, whose order is then its time's (a store reads thousands of records per command);
    any other is parsed."""
    from gatekeeper.core.budgets import CLOCK_SKEW

    bound = (now.astimezone(dt.timezone.utc) + CLOCK_SKEW).isoformat(timespec="seconds")

    def check(value: object) -> str | None:
        if isinstance(value, str) and value <= bound and _STORED.fullmatch(value):
            return None
        return beyond_clock(value, now, field=field)

    return check


def unusable(doc: Any, where: str = "stored record") -> str | None:
    """Why a stored record cannot be a baseline (``read_record``'s reason), or None."""
    return read_record(doc if isinstance(doc, Mapping) else None, where)[1]


# The environment fields that must match for two results to be compared at all
# (a nightly result is never the stable channel's baseline).
_MUST_MATCH = ("channel", "device_kind", "arch")


def comparability(baseline: StageReport, candidate: StageReport) -> str | None:
    """None when comparable, else the reason in plain words (never compared silently)."""
    b, c = baseline.environment, candidate.environment
    for name in _MUST_MATCH:
        bv, cv = _env_value(b, name), _env_value(c, name)
        if bv != cv:
            return f"baseline ran on {name} {bv}, this run on {cv}"
    if _minor(b.rocm_version) != _minor(c.rocm_version):
        return f"baseline ran on ROCm {b.rocm_version}, this run on ROCm {c.rocm_version}"
    # "sweep": a sweep's points are compared point by point with the same sweep's, never with a single run
    for key in ("model", "batch_size", "input_shape", "sweep"):
        if baseline.config.get(key) != candidate.config.get(key):
            return f"baseline used {key}={baseline.config.get(key)!r}, this run {key}={candidate.config.get(key)!r}"
    # a power cap or a performance level moves the timings as a regression does: a baseline taken with other
    # settings is another machine (a setting only one side recorded is not known to differ)
    for label, before, after in gpu_state.differences(b.extra, c.extra):
        return f"baseline ran with {label} {before}, this run with {after}"
    return None


def first_comparable(
    candidates: Iterable[tuple[RunInfo, StageReport]], like: StageReport, *, passed_only: bool = False
) -> tuple[tuple[RunInfo, StageReport] | None, list[str]]:
    """The first candidate comparable with ``like`` (``comparability``), and why each one before it was not.

    Candidates come newest first and may be fetched lazily: none after the one found is read. With
    ``passed_only``, a candidate whose stage did not pass is not one either ("the baseline stage failed").
    Nothing found: (None, the reasons in candidate order; empty when there was no candidate).
    """
    reasons: list[str] = []
    for info, report in candidates:
        reason = comparability(report, like)
        if reason is None and passed_only and report.status != "passed":
            reason = f"the baseline stage {report.status}"
        if reason is None:
            return (info, report), reasons
        reasons.append(reason)
    return None, reasons


def _env_value(env: Environment, name: str) -> Any:
    return env.arch if name == "arch" else getattr(env, name)


def _minor(version: str | None) -> str | None:
    return ".".join(version.split(".")[:2]) if version else None
