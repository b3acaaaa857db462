"""Findings for facts the snapshot's files disagree on (today: a GPU's gfx target)."""

from __future__ import annotations

from collections.abc import Mapping

from gatekeeper.machine import archcompat
from gatekeeper.machine.facts import Fact
from gatekeeper.machine.findings import Finding

__all__ = ["fact_conflict_findings"]


def fact_conflict_findings(facts: tuple[Fact, ...], environ: Mapping[str, str]) -> list[Finding]:
    """Files that disagree on a GPU's target: an override, a mixed machine, or captures of two machines."""
    out = []
    override = archcompat.override_target(environ.get("HSA_OVERRIDE_GFX_VERSION"))
    for f in facts:
        if f.name != "gfx targets" or not f.conflicting:
            continue
        others = "; ".join(f"{s} says {', '.join(v)}" for s, v in f.conflicting)
        message = f"{f.source} says {', '.join(f.value)}, but {others}"
        if override and override in f.value:
            # the runtime reports the override's target, KFD and amd-smi the chip's: explained, and
            # hygiene.HSA_OVERRIDE_GFX_VERSION already warns about the override itself
            out.append(Finding("facts.gfx_targets", "info", f"{message} (HSA_OVERRIDE_GFX_VERSION selects {override})"))
            continue
        out.append(
            Finding(
                "facts.gfx_targets",
                "warning",
                message,
                "rocminfo reports HSA_OVERRIDE_GFX_VERSION's target, the KFD topology and amd-smi the chip's own; "
                "check that all files come from the same machine and whether an override is set",
            )
        )
    return out
