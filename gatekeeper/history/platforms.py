"""Is a change the code's or one platform's? The same two commits, judged on every platform in the store.

A team that runs one model on ROCm and on CUDA (or on two GPU generations) records both into one store.
When a metric moved between two commits, the other platforms answer whom to call:

* it moved the same way on every platform measured: the change is in the **code** between the commits;
* it moved on some platforms and significantly less on the others (equivalent, where one run a side can
  show it): it is those **platforms'**. When their stack changed between the two runs (ROCm, MIOpen, the
  driver, the image) the stack is named; when it did not, the commits changed a path only those platforms
  take (a kernel, an op's backend);
* moved opposite ways (**mixed**), or the others too noisy to tell (**inconclusive**), or only one
  platform ran both commits (**one platform**): said as such, never guessed.

A platform is (device kind, architecture): ``rocm gfx942``, ``cuda sm_90``, ``cpu cpu``. Runs are matched
by commit; a series is (stage, channel, model configuration, project), across branches, because a commit
is the same code on whichever branch it ran. Each platform's run at a commit is its newest record there.
Without ``base``, the base is the newest commit before the head that every platform with a head run also
ran.

Each platform's move pools the runs of one level on each side, where its history has them: before, the runs
of that platform's series (``changes.group_key``: channel, device, configuration, branch, as ``history
changes`` reads it) from the run at the base back; after, from the first run at the head forward. A side
stops short of the platform's own nearest other change point (``gatekeeper.stats.changepoint``, as
``history changes`` finds them on the same series; past every run its span may start or end at, so a
mislocated change shortens a side rather than mixing two levels into it; a change whose span reaches
between the two commits may be the judged move itself, misplaced, and is no cut) and at ``RUNS_A_SIDE`` runs
(``gatekeeper.history.platform_sides``). A
series too short for the change scan to have looked (fewer than 6 runs with the metric) keeps one run a
side, and so does a base recorded after the head. The move is judged by ``gatekeeper.stats.shift.pooled_shift``
(one run a side: ``level_shift`` on the two runs' per-process medians, as before; several: the run is the unit
where runs scatter beyond their processes).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gatekeeper.core.errors import InputError
from gatekeeper.history.changes import config_key, run_fields, stack_diff
from gatekeeper.history.platform_sides import RUNS_A_SIDE, Sides
from gatekeeper.history.sql_schema import SeriesRow
from gatekeeper.stats.shift import Shift, pooled_shift, shift_difference

__all__ = [
    "RUNS_A_SIDE", "Finding", "PlatformMove", "Triage", "across_platforms", "platform_triage", "platforms_of",
    "series_key",
]  # fmt: skip

Call = Literal["code", "platform", "mixed", "inconclusive", "one platform", "no change"]
_MIN_PREFIX = 7  # the shortest commit prefix git itself prints
_FEW = 3  # fewer runs than this on a side: the call says how many each platform had


@dataclass(frozen=True)
class PlatformMove:
    """One platform's runs at the two commits and how the metric moved between them."""

    platform: str
    base: SeriesRow
    head: SeriesRow
    shift: Shift
    stack: tuple[tuple[str, str | None, str | None], ...]  # what differs between the two runs' stacks

    def to_dict(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "direction": self.shift.direction,
            "change": self.shift.change,
            "ci": [self.shift.ci[0] - 1.0, self.shift.ci[1] - 1.0],
            "p_value": self.shift.p_value,
            "reason": self.shift.reason,
            "runs_before": self.shift.runs[0],
            "runs_after": self.shift.runs[1],
            "unit": self.shift.unit,
            "base_run": run_fields(self.base),
            "head_run": run_fields(self.head),
            "stack_changes": [{"component": c, "before": a, "after": b} for c, a, b in self.stack],
        }


@dataclass(frozen=True)
class Finding:
    """One metric of one series at the two commits: the call, why, and every platform's move."""

    stage: str
    metric: str
    channel: str | None
    model: str | None
    call: Call
    why: str
    moves: tuple[PlatformMove, ...]
    missing: tuple[str, ...]  # platforms of the series with a head run but no run at the base (or no metric)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "metric": self.metric,
            "channel": self.channel,
            "model": self.model,
            "call": self.call,
            "why": self.why,
            "platforms": [m.to_dict() for m in self.moves],
            "missing": list(self.missing),
        }


@dataclass(frozen=True)
class Triage:
    head: str  # the commit asked about, as recorded
    findings: tuple[Finding, ...]
    unmatched: tuple[str, ...]  # series whose platforms share no earlier commit, in words

    def to_dict(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "findings": [f.to_dict() for f in self.findings],
            "unmatched": list(self.unmatched),
        }


def platform_triage(
    rows: Iterable[SeriesRow],
    *,
    commit: str,
    base: str | None = None,
    metric: str | None = None,
    alpha: float = 0.01,
    min_effect: float = 0.02,
    store: str = "the store",
    skipped: Sequence[str] = (),
    only: str | None = None,
) -> Triage:
    """Every metric of every series that ran ``commit``, judged per platform against ``base`` (see above).

    ``rows``: the store's series, oldest first. An unknown or ambiguous commit (or base) is an
    ``InputError`` naming the option (and, when the store could not read some records, the first reason:
    ``skipped``); a series whose platforms cannot be matched is listed in ``unmatched``. ``only``: the one
    metric (its bare name) to read of each series, where the caller knows it (a change point's).
    """
    rows = list(rows)
    head = _resolve(rows, commit, "--commit", store, skipped)
    base_full = _resolve(rows, base, "--base", store, skipped) if base else None
    if base_full == head:
        raise InputError(None, "--base", f"{base} is the same commit as --commit", "give an earlier commit")
    groups: dict[tuple[Any, ...], list[SeriesRow]] = {}
    for row in rows:
        groups.setdefault(series_key(row), []).append(row)
    findings: list[Finding] = []
    unmatched: list[str] = []
    for series in groups.values():
        heads = _newest_by_platform(r for r in series if r.commit == head)
        if not heads:
            continue
        chosen = base_full or _common_base(series, heads)
        label = _label(series[0])
        if chosen is None:
            names = ", ".join(sorted(heads))
            unmatched.append(f"{label}: no commit before {head[:12]} ran on every platform that ran it ({names})")
            continue
        bases = _newest_by_platform(r for r in series if r.commit == chosen)
        findings += _judge(series[0], heads, bases, Sides(series, only), metric, alpha=alpha, min_effect=min_effect)
    return Triage(head, tuple(sorted(findings, key=lambda f: (f.stage, f.metric))), tuple(unmatched))


def across_platforms(rows: Sequence[SeriesRow], before: SeriesRow, first: SeriesRow, metric: str) -> Finding | None:
    """How ``metric`` moved between the runs ``before`` and ``first`` (a change point's neighbours) on every
    platform of their series in ``rows``; None when it ran on one platform only or a commit is not known."""
    if not before.commit or not first.commit or before.commit == first.commit:
        return None
    key = series_key(first)
    series = [r for r in rows if series_key(r) == key]
    if len(platforms_of(series)) < 2:
        return None
    try:
        only = metric.removeprefix(f"{first.stage}.")
        triage = platform_triage(series, commit=first.commit, base=before.commit, metric=metric, only=only)
    except InputError:  # a commit no readable record holds: nothing to add
        return None
    return triage.findings[0] if triage.findings else None


def _judge(
    first: SeriesRow,
    heads: Mapping[str, SeriesRow],
    bases: Mapping[str, SeriesRow],
    sides: Sides,
    metric: str | None,
    *,
    alpha: float,
    min_effect: float,
) -> list[Finding]:
    names: set[str] = set()
    for platform in heads:
        if platform in bases:
            names |= sides.names(bases[platform]) & sides.names(heads[platform])
    out = []
    for name in sorted(names):
        if metric and not any(fnmatch.fnmatchcase(c, metric) for c in (name, f"{first.stage}.{name}")):
            continue
        moves, missing = [], []
        for platform in sorted(heads):
            b, h = bases.get(platform), heads[platform]
            pair = sides.pair(b, h, name) if b is not None else None
            if b is None or pair is None:
                missing.append(platform)
                continue
            shift = pooled_shift(*pair, alpha=alpha, min_effect=min_effect)
            moves.append(PlatformMove(platform, b, h, shift, stack_diff(b, h)))
        if moves:
            call, why = _call(moves, missing, alpha)
            out.append(Finding(first.stage, name, first.channel, first.model, call, why, tuple(moves), tuple(missing)))
    return out


def _call(moves: Sequence[PlatformMove], missing: Sequence[str], alpha: float) -> tuple[Call, str]:
    """The call and why; when a side had fewer than ``_FEW`` runs somewhere, how many each platform had."""
    call, why = _verdict(moves, missing, alpha)
    if any(min(m.shift.runs) < _FEW for m in moves):
        why += "; runs before/after: " + ", ".join(f"{m.platform} {m.shift.runs[0]}/{m.shift.runs[1]}" for m in moves)
    return call, why


def _verdict(moves: Sequence[PlatformMove], missing: Sequence[str], alpha: float) -> tuple[Call, str]:
    moved = [m for m in moves if m.shift.direction in ("up", "down")]
    still = [m for m in moves if m not in moved]  # equivalent, or too noisy to tell alone
    others = f"; no run to compare on {', '.join(missing)}" if missing else ""
    if len(moves) == 1:
        only = moves[0]
        return "one platform", f"only {only.platform} ran both commits ({_size(only)}): nothing to compare with{others}"
    if not moved:
        unsure = [m for m in moves if m.shift.direction == "inconclusive"]
        if unsure:
            return "inconclusive", f"too noisy to tell on {_names(unsure)}{others}"
        return "no change", f"equivalent on {_names(moves)}{others}"
    if len({m.shift.direction for m in moved}) > 1:
        return "mixed", "; ".join(f"{m.shift.direction} on {m.platform} ({_size(m)})" for m in moved) + others
    where = ", ".join(f"{m.platform} {_size(m)}" for m in moved)
    if not still:
        return (
            "code",
            f"moved {moved[0].shift.direction} on every platform ({where}): the change is in the commits{others}",
        )
    # the others did not move significantly; they tell only if each moved significantly less than each that did
    apart = all(shift_difference(m.shift, s.shift) < alpha for m in moved for s in still)
    if not apart:
        return "inconclusive", (
            f"moved on {where}; on {_sizes(still)} neither significantly nor significantly less{others}"
        )
    stacks = [f"{m.platform}: {_stack(m)}" for m in moved if m.stack]
    cause = (
        f"its stack changed between the two runs ({'; '.join(stacks)})"
        if stacks
        else "the stack there did not change, so the commits changed a path only it takes"
    )
    equivalent = all(s.shift.direction == "equivalent" for s in still)
    contrast = "equivalent" if equivalent else "significantly less"
    return "platform", f"moved on {where} only, {contrast} on {_sizes(still)}: {cause}{others}"


def _sizes(moves: Sequence[PlatformMove]) -> str:
    return ", ".join(f"{m.platform} {_size(m)}" for m in moves)


def _size(m: PlatformMove) -> str:
    s = m.shift
    return f"{s.change:+.1%} [{s.ci[0] - 1:+.1%}, {s.ci[1] - 1:+.1%}]"


def _names(moves: Sequence[PlatformMove]) -> str:
    return ", ".join(m.platform for m in moves)


def _stack(m: PlatformMove) -> str:
    return ", ".join(f"{c} {a or '-'} -> {b or '-'}" for c, a, b in m.stack)


def _platform(row: SeriesRow) -> str:
    return f"{row.device_kind or 'unknown'} {row.arch or 'unknown'}"


def platforms_of(rows: Iterable[SeriesRow]) -> set[str]:
    """The platforms ``rows`` ran on (``rocm gfx942``, ``cuda sm_90``)."""
    return {_platform(r) for r in rows}


def series_key(row: SeriesRow) -> tuple[Any, ...]:
    """What makes runs on different platforms the same series: stage, channel, model configuration, project."""
    return (row.stage, row.channel, config_key(row), row.stack.get("project"))


def _label(row: SeriesRow) -> str:
    return f"{row.stage} ({row.channel or 'no channel'}, {row.model or 'no model'})"


def _newest_by_platform(rows: Iterable[SeriesRow]) -> dict[str, SeriesRow]:
    out: dict[str, SeriesRow] = {}
    for row in rows:  # oldest first: the newest of each platform stays
        out[_platform(row)] = row
    return out


def _common_base(series: Sequence[SeriesRow], heads: Mapping[str, SeriesRow]) -> str | None:
    """The newest commit recorded before every head run that each platform with a head run ran."""
    seen: dict[str, set[str]] = {}
    newest: dict[str, str] = {}
    for row in series:
        p = _platform(row)
        if p in heads and row.commit and row.commit != heads[p].commit and row.recorded_at < heads[p].recorded_at:
            seen.setdefault(row.commit, set()).add(p)
            newest[row.commit] = max(newest.get(row.commit, ""), row.recorded_at)
    common = [c for c, platforms in seen.items() if platforms == set(heads)]
    return max(common, key=lambda c: newest[c]) if common else None


def _resolve(rows: Sequence[SeriesRow], given: str | None, option: str, store: str, skipped: Sequence[str]) -> str:
    """The one recorded commit ``given`` names (whole, or a prefix of at least 7 hex digits)."""
    text = (given or "").strip().lower()
    if len(text) < _MIN_PREFIX or any(ch not in "0123456789abcdef" for ch in text):
        raise InputError(
            None, option, f"{given!r} is not a commit", f"give a commit id of at least {_MIN_PREFIX} hex digits"
        )
    found = sorted({r.commit for r in rows if r.commit and r.commit.lower().startswith(text)})
    if not found:
        problem = f"no readable run at commit {text} is recorded in {store}"
        if skipped:
            problem += f" ({len(skipped)} record(s) could not be read; the first: {skipped[0]})"
        hint = "gatekeeper history export lists every recorded run with its commit"
        raise InputError(None, option, problem, hint)
    if len(found) > 1:
        raise InputError(None, option, f"{text} names {len(found)} recorded commits", "give more of the commit id")
    return found[0]
