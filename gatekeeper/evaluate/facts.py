"""What ``when:`` conditions (of gates and waivers) are judged on: the channel, the kind of pipeline (from the
job's own CI variables, never from an artifact), and the stack of the stage the gate judges. Each stage job may
run on another runner, so a gate of one stage is never decided by another stage's device; a gate of no one stage
(``junit:``) gets the facts every stage shares, and ``DIFFER`` for one they do not (no value a condition names:
the condition is unmet, never met by chance). Pure, like ``decide``."""

from __future__ import annotations

from collections.abc import Mapping

from gatekeeper.contract.stage_report import StageReport

__all__ = ["DIFFER", "Facts"]

_FACTS = ("device_kind", "gfx_arch", "rocm_version", "torch_version")
DIFFER = "different in each stage"  # a fact the stages disagree on, for a gate of no one stage


class Facts:
    def __init__(self, channel: str, reports: Mapping[str, StageReport], pipeline: str = "local") -> None:
        self.channel = channel
        self.pipeline = pipeline
        self.by_stage = {name: {f: getattr(r.environment, f) for f in _FACTS} for name, r in reports.items()}
        common: dict[str, str | None] = {}
        for f in _FACTS:
            values = {facts[f] for facts in self.by_stage.values()}
            common[f] = values.pop() if len(values) == 1 else (DIFFER if values else None)
        self.common = common

    def of(self, stage: str | None) -> dict[str, str | None]:
        """The facts for a gate of ``stage`` (None, or a stage that did not run: those every stage shares)."""
        return {"channel": self.channel, "pipeline": self.pipeline, **self.by_stage.get(stage or "", self.common)}
