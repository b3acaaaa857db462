"""bisect.json as a running bisection keeps it: created, reopened for ``--resume``, saved, its decisions.

``ensure_new`` refuses to start over a recorded bisection;
``new_document`` is the record of one that has run nothing yet;
``reopen`` reads a recorded one back for ``--resume``, refusing it when its
request differs from this run's; ``save`` writes it (atomically, through
``contract.bisect_report``) with the summary brought up to date.
``keep_decision``, ``recorded_decision`` and ``replay`` are a candidate's
decisions as bisect.json keeps them: one per reference, and on ``--resume``
the decision an interrupted run had reached, made again unchanged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gatekeeper import __version__
from gatekeeper.bisect.decide import Judgement
from gatekeeper.bisect.providers import Candidate
from gatekeeper.bisect.search import max_decisions
from gatekeeper.contract.bisect_report import read_bisect, write_bisect
from gatekeeper.core.errors import InputError

__all__ = [
    "candidates_of",
    "ensure_new",
    "keep_decision",
    "new_document",
    "recorded_decision",
    "reopen",
    "replay",
    "run_count",
    "save",
]


def new_document(request: Mapping[str, Any], cands: Sequence[Candidate]) -> dict[str, Any]:
    """The record of a bisection over ``cands`` that has measured nothing yet."""
    now = _now()
    return {
        "schema": "gatekeeper.bisect/v1",
        "gatekeeper_version": __version__,
        "status": "running",
        "started_at": now,
        "updated_at": now,
        "request": request,
        "candidates": [
            {**c.to_dict(), "state": "untried", "unavailable": None, "facts": {}, "rounds": [], "decisions": []}
            for c in cands
        ],
        "summary": {"candidates": len(cands), "run": 0, "max_decisions": max_decisions(len(cands))},
        "result": None,
    }


def ensure_new(path: Path) -> None:
    """Refuse to start a bisection where one is recorded: ``--resume`` continues it."""
    if path.exists():
        raise InputError(
            path, "", "a bisection is already recorded here", "continue it with --resume, or choose another --out"
        )


def reopen(path: Path, request: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded bisection at ``path``, when it asked what ``request`` asks (else ``InputError`` on the key)."""
    if not path.exists():
        raise InputError(path, "", "nothing to resume: no bisect.json here", "drop --resume, or fix --out")
    doc = read_bisect(path)
    for key, value in request.items():
        if doc["request"].get(key) != value:
            raise InputError(
                path,
                f"request.{key}",
                f"the recorded bisection has {doc['request'].get(key)!r}, this run {value!r}",
                "resume with the same options, or start a new bisection in another --out",
            )
    return doc


def candidates_of(doc: Mapping[str, Any]) -> list[Candidate]:
    """The candidates as the document lists them."""
    return [Candidate(c["index"], c["ref"], c["label"], c["info"]) for c in doc["candidates"]]


def save(path: Path, doc: dict[str, Any], *, reused: int) -> None:
    """Write ``doc`` to ``path`` with ``updated_at`` and the summary's counts brought up to date."""
    doc["updated_at"] = _now()
    s = doc["summary"]
    s["run"] = run_count(doc)
    s["reused"] = reused
    s["processes"] = sum(r.get("processes") or 1 for c in doc["candidates"] for r in c["rounds"])
    write_bisect(path, doc)


def run_count(doc: Mapping[str, Any]) -> int:
    """Candidates measured at least once."""
    return sum(1 for c in doc["candidates"] if c["rounds"])


def keep_decision(entry: dict[str, Any], reference: int | None, j: Judgement) -> None:
    """Keep ``j`` as the candidate's decision against ``reference``, replacing one recorded before."""
    decisions = [d for d in entry["decisions"] if d["reference"] != reference]
    entry["decisions"] = [*decisions, j.record(reference)]


def recorded_decision(
    entry: Mapping[str, Any], reference: int | None, rounds: int, reference_rounds: int
) -> dict[str, Any] | None:
    """The candidate's recorded decision against ``reference`` with looks at no more rounds than are there."""
    for d in entry["decisions"]:
        looks = d.get("looks") or []
        if d["reference"] != reference or not looks:
            continue
        last = looks[-1]
        # only looks at rounds that are still all there (the rounds of bisect.json, reloaded and hash-checked)
        if last[1] <= rounds and last[0] <= reference_rounds:
            return d
    return None


def replay(prior: Mapping[str, Any]) -> Judgement:
    """A recorded decision as the ``Judgement`` that made it."""
    return Judgement(
        prior["decision"],
        prior["reason"],
        tuple(dict(g) for g in prior.get("gates") or ()),
        int(prior["processes"]),
        prior.get("reference_processes"),
        tuple((int(a), int(b)) for a, b in prior["looks"]),
    )


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
