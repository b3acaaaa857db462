"""``gatekeeper bisect --since-change STATE --history STORE``: bisect the newest unconfirmed change point.

A slow creep or a small step never turns the nightly gate red (evaluate's ``history-change`` gate only
warns), so ``--since-green`` never bisects it. This step reads the change points of the history store as
``gatekeeper history changes`` does (``gatekeeper.history.changes.find_changes``, with the store's anchor
marks), keeps the unconfirmed ones (of ``--metric`` and ``--channel`` when given), and plans a bisection of
the newest one (by its first run) that the STATE file has not recorded as bisected, between the change's
two ends (the last run before its span and the first run after it): over the torch versions of the nightly
index when torch changed, else over the image's tags when only the tag of the same repository changed,
else over the commits. It is judged by the change's stage and metric.

The STATE file (the CI template keeps it in the job's cache) records each change bisected: its stage,
metric, series, first run (id, commit, time) and the range bisected; the newest ``KEEP`` are kept. A change
of another metric at the same run of the same series (one step moves latency, its percentiles and
throughput), or one whose range was bisected already (the same step on another device), is not bisected
again. The caller records a change
(``record_bisected``) once the bisection has started (its candidates were listed): a start that fails (a
commit the clone lacks, a tool missing) is retried the next night. A change whose estimated first run moves
within its span as nights are added is the same change, not bisected again.

Everything read from the store is recorded input: a commit is used only when it is hex (as ``nightly``'s),
a torch version only when ``packaging`` parses it, an image only when its repository and tag have the
shapes the image provider accepts; a change without such ends is passed over, named in the reason.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from gatekeeper.bisect.nightly import COMMIT, Plan
from gatekeeper.bisect.providers.image import REPOSITORY, TAG  # the shapes the image provider accepts
from gatekeeper.contract import schemas
from gatekeeper.core import files
from gatekeeper.core.errors import InputError

__all__ = ["KEEP", "STATE_SCHEMA", "ChangePlan", "plan_since_change", "record_bisected"]

STATE_SCHEMA = "gatekeeper.bisect-changes/v1"
KEEP = 200  # identities kept in STATE: more than a year of nightly bisections
_METRIC = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}$")
_SERIES = ("channel", "device_kind", "arch", "branch", "model")


@dataclass(frozen=True)
class ChangePlan:
    """The plan (``nightly.Plan``), what judges it (the change's stage and metric), its channel, and the
    identity to record in STATE once the bisection has started (None with no plan)."""

    plan: Plan
    stage: str | None = None
    metric: str | None = None
    channel: str | None = None
    identity: Mapping[str, Any] | None = field(default=None)
    skipped: tuple[str, ...] = ()  # the store's records that could not be read (for warnings)


def plan_since_change(
    *, state: Path, history: str | None, metric: str | None = None, channel: str | None = None, index_url: str | None
) -> ChangePlan:
    from gatekeeper.history.changes import find_changes
    from gatekeeper.history.views import sql_store

    if not history:
        raise InputError(
            None, "--since-change", "needs the history store", "add --history sqlite:PATH (or postgresql://...)"
        )
    if state.is_dir():
        raise InputError(state, "", "is a directory: the since-change bisect state is one file", "pass a file path")
    done, set_aside = _read_done(state)
    store = sql_store(history)
    rows = store.series(channel=channel, summaries=True)
    left_out = tuple(store.skipped)

    def nothing(reason: str) -> ChangePlan:
        return ChangePlan(Plan(None, reason=reason), skipped=left_out)

    changes = [c for c in find_changes(rows, metric=metric, marks=store.anchors()) if not c.confirmed]
    which = "".join(x for x in (metric and f" of {metric}", channel and f" on the {channel} channel") if x)
    if not changes:
        return nothing(f"no unconfirmed change point{which} in {len(rows)} recorded runs: nothing to bisect{set_aside}")
    # newest first; at one run, the largest move first (one step moves several metrics: it is bisected once)
    newest = sorted(changes, key=lambda c: (str(c.first.recorded_at), abs(c.point.change)), reverse=True)
    fresh = [c for c in newest if not any(_same(d, c) for d in done)]
    if not fresh:
        return nothing(
            f"every unconfirmed change point{which} ({len(changes)}) was already bisected (recorded in {state})"
            f"{set_aside}"
        )
    passed_over: list[str] = []
    ranges = {(d.get("provider"), d.get("good"), d.get("bad")) for d in done}
    for change in fresh:
        found = _plan(change, index_url)
        if isinstance(found, str):
            passed_over.append(f"{_name(change)}: {found}")
            continue
        if (found.provider, found.good, found.bad) in ranges:  # another series or stage moved at the same change
            continue
        skipped = f" (passed over, newer: {'; '.join(passed_over)})" if passed_over else ""
        plan = Plan(found.provider, found.good, found.bad, found.options, f"{_name(change)}: {found.reason}{skipped}"
                    f"{set_aside}")  # fmt: skip
        key_channel = change.key.get("channel")
        return ChangePlan(
            plan,
            skipped=left_out,
            stage=change.stage,
            metric=change.metric.split("[", 1)[0],
            channel=key_channel if key_channel in ("stable", "nightly") else None,
            identity={**_identity(change), "provider": found.provider, "good": found.good, "bad": found.bad},
        )
    if not passed_over:
        return nothing(
            f"every unconfirmed change point{which} ({len(changes)}) lies in a range already bisected (recorded in "
            f"{state}){set_aside}"
        )
    return nothing("; ".join(passed_over) + set_aside)


def record_bisected(state: Path, identity: Mapping[str, Any]) -> None:
    """Add ``identity`` (a ``ChangePlan``'s) to STATE, the newest ``KEEP`` kept; a bad STATE starts afresh."""
    done, _ = _read_done(state)
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    entries = [*done, {**identity, "bisected_at": stamp}][-KEEP:]
    files.write_json(state, {"schema": STATE_SCHEMA, "bisected": entries})


def _read_done(state: Path) -> tuple[list[dict[str, Any]], str]:
    """The identities recorded, and a note when the file was set aside (the job's cache: any job can write it)."""
    if not (state.exists() or state.is_symlink()):
        return [], ""
    try:
        doc = files.read_json(state, what="since-change bisect state")
        schemas.validate(STATE_SCHEMA, doc, path=str(state))
    except InputError as err:
        return [], f" (the state file was set aside: {err})"
    return list(doc["bisected"]), ""


def _text(value: Any) -> str | None:
    return None if value is None else str(value)[:256]


def _identity(change: Any) -> dict[str, Any]:
    return {
        "stage": _text(change.stage),
        "metric": _text(change.metric),
        "series": {k: _text(change.key.get(k)) for k in _SERIES},
        "first_run_id": int(change.first.row_id),
        "first_commit": _text(change.first.commit),
        "first_at": str(change.first.recorded_at)[:64],
    }


def _same(done: Mapping[str, Any], change: Any) -> bool:
    """The recorded change is this one: same stage and series, and the same first run, or a first run within this
    change's span (the estimate moves as nights are added; the change does not). Any metric: one step moves
    several (latency, its percentiles, throughput), and one bisection of its range answers for them all."""
    mine = _identity(change)
    if any(done.get(k) != mine[k] for k in ("stage", "series")):
        return False
    if done.get("first_run_id") == mine["first_run_id"]:
        return True
    good, bad = change.good or change.before, change.bad or change.first
    return str(good.recorded_at) < str(done.get("first_at")) <= str(bad.recorded_at)


def _name(change: Any) -> str:
    first = change.first
    where = f"pipeline {first.pipeline_id}" if first.pipeline_id else f"record {first.row_id}"
    commit = f", commit {first.commit[:12]}" if _commit(first.commit) else ""
    series = ", ".join(str(change.key.get(k)) for k in ("channel", "device_kind", "branch") if change.key.get(k))
    return (
        f"unconfirmed change {change.stage}.{change.metric} {change.point.change * 100:+.1f}% from {where}{commit} "
        f"({first.recorded_at}; {series})"
    )


def _commit(value: Any) -> str | None:
    return value if isinstance(value, str) and COMMIT.fullmatch(value) else None


def _torch(value: Any) -> str | None:
    if not isinstance(value, str) or not value or len(value) > 64 or value != value.strip():
        return None  # packaging's Version takes surrounding whitespace, a newline included
    try:
        Version(value)
    except InvalidVersion:
        return None
    return value


def _image(ref: Any) -> tuple[str, str] | None:
    """(repository, tag) of a recorded image reference in the shapes the image provider accepts, else None."""
    from gatekeeper.history.changes import image_ref

    found = image_ref(ref)
    if found is None or not REPOSITORY.fullmatch(found[0]) or not TAG.fullmatch(found[1]):
        return None
    return found


def _plan(change: Any, index_url: str | None) -> Plan | str:
    """The bisection between the change's ends, or why there is none."""
    good, bad = change.good or change.before, change.bad or change.first
    if change.stage not in _stages() or not _METRIC.fullmatch(change.metric.split("[", 1)[0]):
        return "its stage or metric is no name gatekeeper judges: not bisecting it"
    old_torch, new_torch = _torch(good.environment.get("torch_version")), _torch(bad.environment.get("torch_version"))
    if old_torch and new_torch and Version(new_torch) < Version(old_torch):
        # the pip provider bisects upwards from an older good version: a step back has no such range (it was
        # exit 2, "swap them", every night, and the change was never recorded as bisected)
        return f"torch went back {old_torch} -> {new_torch}: a downgrade is not bisected over the torch versions"
    if old_torch and new_torch and Version(old_torch) != Version(new_torch):  # "2.6" is "2.6.0": no range
        return Plan(
            "pip",
            old_torch,
            new_torch,
            {"package": "torch", "index_url": _index(old_torch, new_torch, index_url), "find_links": None},
            f"torch changed {old_torch} -> {new_torch}: bisecting the torch versions",
        )
    old, new = _image(good.stack.get("image")), _image(bad.stack.get("image"))
    if old and new and old[0] == new[0] and old[1] != new[1]:
        return Plan(
            "image",
            old[1],
            new[1],
            {"image": old[0]},
            f"the image changed {old[0]}:{old[1]} -> {new[1]} (torch did not): bisecting the image tags",
        )
    old_sha, new_sha = _commit(good.commit), _commit(bad.commit)
    if old_sha and new_sha and old_sha != new_sha:
        return Plan(
            "git",
            old_sha,
            new_sha,
            {},
            f"the commit changed {old_sha[:10]} -> {new_sha[:10]} (torch and the image did not): bisecting the commits",
        )
    return "nothing between the ends to bisect: neither torch, the image tag nor the commit changed between them" + (
        "" if old_sha and new_sha else " (a recorded commit that is not hex is not used)"
    )


def _index(old: str, new: str, index_url: str | None) -> str:
    if not index_url:
        raise InputError(
            None,
            "--index-url",
            f"torch changed ({old} -> {new}) but no nightly index was given",
            "pass the nightly index, e.g. --index-url https://download.pytorch.org/whl/nightly/rocm6.2",
        )
    return index_url


def _stages() -> Sequence[str]:
    from gatekeeper.contract.stage_names import STAGE_NAMES

    return STAGE_NAMES
