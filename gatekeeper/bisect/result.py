"""The answer of a finished bisection: bisect.json's ``result`` object.

``compose`` builds it from what the search found: one culprit per first bad
candidate (with what changed, asked of the provider, and the decision that
made it bad), the one-line ``note`` the CLI prints last, the first culprit's
environment, and the ``signature`` (``signature_metric``, channel,
environment fingerprint, culprit) by which a nightly recognises the same
regression again. The reproduction bundle is the caller's (it fills
``repro_bundle``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from gatekeeper.bisect.providers import Candidate, Provider
from gatekeeper.bisect.request import BisectOptions
from gatekeeper.bisect.search import Found, max_decisions
from gatekeeper.contract.bisect_report import fingerprint
from gatekeeper.contract.stage_report import StageReport
from gatekeeper.core.escape import shell_join

__all__ = ["compose", "culprits", "note", "signature_metric"]


def compose(
    found: Sequence[Found],
    *,
    opts: BisectOptions,
    cands: Sequence[Candidate],
    entries: Sequence[dict[str, Any]],
    provider: Provider,
    report: StageReport | None,
    run: int,
) -> dict[str, Any]:
    """bisect.json's ``result``; ``entries`` are its candidates, ``report`` the first bad's pooled stage result."""
    found_culprits = culprits(found, cands=cands, entries=entries, provider=provider)
    first = found[0]
    environment = report.environment.to_dict() if report is not None else None
    return {
        "first_bad": first.first_bad,
        "last_good": first.last_good,
        "culprits": found_culprits,
        "note": note(found, cands=cands, run=run),
        "signature": {
            "metric": signature_metric(opts, entries[first.first_bad]["decisions"]),
            "channel": opts.channel
            or os.environ.get("GATEKEEPER_CHANNEL")
            or (report.environment.channel if report is not None else None),
            "fingerprint": fingerprint(environment),
            "culprit": f"{opts.provider}:{cands[first.first_bad].ref}",
        },
        "environment": environment,
        "repro_bundle": None,
    }


def culprits(
    found: Sequence[Found], *, cands: Sequence[Candidate], entries: Sequence[dict[str, Any]], provider: Provider
) -> list[dict[str, Any]]:
    """One culprit per search: the range it narrowed, the decision that made it bad, and what changed."""
    facts = {c["index"]: c.get("facts") or {} for c in entries}
    out = []
    for n, f in enumerate(found):
        lg, fb = cands[f.last_good], cands[f.first_bad]
        try:
            changes = provider.changes(lg, fb, facts)
        except Exception as err:  # what changed is a courtesy: its failure must not lose the answer
            changes = {"error": f"{type(err).__name__}: {err}"[:300]}
        ref = 0 if n == 0 else found[n - 1].first_bad
        symptom = next((d["reason"] for d in entries[f.first_bad]["decisions"] if d["reference"] in (ref, None)), "")
        out.append(
            {
                "last_good": f.last_good,
                "first_bad": f.first_bad,
                "exact": f.exact,
                "unresolved": list(f.unresolved),
                "reference": ref,
                "symptom": symptom[:600],
                "changes": changes,
            }
        )
    return out


def note(found: Sequence[Found], *, cands: Sequence[Candidate], run: int) -> str:
    """The answer in one line: each first bad (or the candidates it may be), and how many were run."""
    parts = []
    for f in found:
        fb = cands[f.first_bad].label
        if f.exact:
            parts.append(f"first bad: {fb} (last good {cands[f.last_good].label})")
        else:
            maybe = ", ".join(cands[i].label for i in f.unresolved)
            parts.append(f"the first bad is one of {maybe} or {fb}: those could not be decided")
    parts.append(f"{run} of {len(cands)} candidates run (at most {max_decisions(len(cands))} on a clean range)")
    return "; ".join(parts)


def signature_metric(opts: BisectOptions, decisions: Sequence[dict[str, Any]]) -> str:
    """What regressed, for the signature: the command, the --metric, or the gates failing in ``decisions``."""
    o = opts
    if not o.stage:
        return f"command: {shell_join(o.command)}"[:200]
    if o.metric:
        return o.metric if o.metric.startswith(f"{o.stage}.") else f"{o.stage}.{o.metric}"
    failing = sorted({g.get("metric", "") for d in decisions for g in d.get("gates", []) if g["outcome"] == "fail"})
    return ",".join(x for x in failing if x) or f"{o.stage} gates"
