"""The reproduction bundle of a bisection's first bad candidate (``<out>/repro/``).

What a developer needs to see the regression with their own eyes, without
gatekeeper's bisection: ``reproduce.sh`` (recreate the first bad candidate's
environment, then run the same stage or command; every value shell-quoted),
the last good and the first bad stage results side by side
(``last-good/<stage>.json``, ``first-bad/<stage>.json``, pooled over their
rounds), ``what-changed.json``, the decision with the gates' reasons
(``decision.json``), the first bad's environment, and, when failing checks
recorded the operator, shapes and dtypes, ``repro.py`` + ``cases.json`` of
``gatekeeper analyze``'s bundle (``gatekeeper.analyze.bundle``), which call
nothing but listed torch operators.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gatekeeper.analyze.bundle import repro_cases, repro_script
from gatekeeper.analyze.diagnosis import FailedCheck
from gatekeeper.bisect.search import Found
from gatekeeper.contract.stage_report import write_stage
from gatekeeper.core import files
from gatekeeper.core.escape import md_code_span, md_text, shell, shell_join

if TYPE_CHECKING:
    from gatekeeper.bisect.engine import _Bisection

__all__ = ["write_repro_bundle"]


def write_repro_bundle(directory: Path, *, bisection: _Bisection, found: Found) -> Path:
    b = bisection
    opts = b.opts
    first, last = b.cands[found.first_bad], b.cands[found.last_good]
    directory.mkdir(parents=True, exist_ok=True)
    lines = ["#!/bin/sh", "# Recreate the first bad candidate and run what the bisection ran (generated).", "set -eu"]
    lines += b.provider.repro_steps(first)  # every value redacted, then quoted (escape.shell)
    if opts.stage:
        args = shell_join(b.runner.stage_args)
        lines.append(f"python -m gatekeeper stage {shell(opts.stage)} --out repro-out {args}".rstrip())
    else:
        lines.append(shell_join(opts.command))
    files.atomic_write(directory / "reproduce.sh", "\n".join(lines) + "\n")
    # README.md renders as markdown (GitLab's artifact browser): a label or ref from bisect.json is a code span
    notes = [
        f"# Reproduce the first bad candidate: {md_code_span(first.label)}",
        "",
        f"gatekeeper bisect --provider {md_text(opts.provider)} found {md_code_span(first.ref)} to be the first bad "
        f"candidate (the last good one: {md_code_span(last.ref)}).",
        "",
        "- `reproduce.sh`: recreate its environment and run the same "
        + ("stage" if opts.stage else "command")
        + " (read it before you run it).",
        "- `what-changed.json`: commits, package versions or image digests between the last good and the first bad.",
        "- `decision.json`: how the first bad candidate was judged, with every gate's reason.",
    ]
    culprit = next((c for c in b.doc["result"]["culprits"] if c["first_bad"] == found.first_bad), None)
    files.write_json(directory / "what-changed.json", (culprit or {}).get("changes", {}))
    files.write_json(directory / "decision.json", b.entry(found.first_bad)["decisions"])
    for name, index in (("first-bad", found.first_bad), ("last-good", found.last_good)):
        m = b.measured.get(index)
        report = m.report() if m is not None else None
        if report is not None:
            write_stage(report, directory / name)
            notes.append(f"- `{name}/{report.stage}.json`: its stage result, every round pooled.")
        elif m is not None and m.rounds:
            files.atomic_write(directory / name / "output-tail.txt", "\n".join(m.rounds[-1]["output_tail"]) + "\n")
            notes.append(f"- `{name}/output-tail.txt`: the end of its output.")
    report = b.measured[found.first_bad].report() if found.first_bad in b.measured else None
    if report is not None:
        files.write_json(directory / "environment.json", report.environment.to_dict())
        notes.append("- `environment.json`: where the first bad candidate was measured.")
        checks = [
            FailedCheck(report.stage, c.name, c.status, c.message, c.details)
            for c in report.checks
            if c.status in ("failed", "error")
        ]
        cases = repro_cases(checks)
        if cases:
            files.write_json(directory / "cases.json", cases)
            files.atomic_write(directory / "repro.py", repro_script())
            notes.append(f"- `repro.py` + `cases.json`: {len(cases)} failing operator case(s); `python repro.py`.")
    facts: dict[str, Any] = b.entry(found.first_bad).get("facts") or {}
    if facts:
        files.atomic_write(directory / "facts.json", json.dumps(facts, indent=2, default=str) + "\n")
        notes.append("- `facts.json`: what preparing it found (installed versions, image digest).")
    files.atomic_write(directory / "README.md", "\n".join(notes) + "\n")
    return directory
