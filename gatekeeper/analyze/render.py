"""A diagnosis as JSON (for machines), Markdown (MR notes, reports) or plain text (the job log)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from gatekeeper.analyze.diagnosis import FailureDiagnosis
from gatekeeper.core.escape import md_code_block, md_code_span, md_link, md_text, terminal_lines

__all__ = ["FORMATS", "failing_label", "render"]

FORMATS = ("json", "md", "text")
_SHOWN = 8  # matches shown in md/text; JSON has them all (capped at MAX_MATCHES)


def render(diagnosis: FailureDiagnosis, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(diagnosis.to_dict(), indent=2) + "\n"
    if fmt == "md":
        return _markdown(diagnosis)
    if fmt == "text":
        # log lines, check names and messages may carry escape sequences and newlines: shown, never interpreted,
        # and none starts a line of its own
        return terminal_lines(_text(diagnosis)) + "\n"
    raise ValueError(f"unknown format {fmt!r}")


def _title(d: FailureDiagnosis) -> str:
    if d.failing_check is not None:
        return f"{d.category} ({_source(d)}, confidence {d.confidence:.2f})"
    known = f"known issue `{d.known_issue}`" if d.known_issue else "no known issue matched"
    if d.decided_by == "model":
        known += ", learned second opinion"
    return f"{d.category} ({known}, confidence {d.confidence:.2f})"


def _source(d: FailureDiagnosis, code: Callable[[str], str] = lambda x: f"`{x}`") -> str:
    """How an artifacts-based diagnosis was reached: the failing check, and the log signature that refined it."""
    where = "from the artifacts: " + code(failing_label(d.failing_check or {}))
    if d.decided_by == "rule" and d.known_issue:
        return f"{where}, refined by the log signature {code(d.known_issue)}"
    if d.known_issue:
        return f"{where}; the log signature {code(d.known_issue)} agrees"
    return where


def failing_label(f: Mapping[str, Any]) -> str:
    """``stage/check`` for a failed check, ``gate NAME`` for a blocking gate."""
    return f"{f.get('stage')}/{f.get('name')}" if f.get("source") == "check" else f"gate {f.get('name')}"


def _structured_lines(d: FailureDiagnosis) -> list[str]:
    """The failing check and the gate it blocked, one line each (plain text, unescaped)."""
    out = []
    f = d.failing_check
    if f is not None:
        what = "failing check" if f.get("source") == "check" else "blocking gate"
        out.append(f"{what}: {failing_label(f)} ({f.get('category')}): {_one_line(str(f.get('message', '')))}")
    g = d.blocking_gate
    if g is not None and (f is None or g.get("source") != f.get("source") or g.get("name") != f.get("name")):
        out.append(f"blocking gate: {g.get('name')}: {_one_line(str(g.get('message', '')))}")
    return out


def _md_title(d: FailureDiagnosis) -> str:
    if d.failing_check is not None:
        return f"{md_text(d.category)} ({_source(d, md_code_span)}, confidence {d.confidence:.2f})"
    known = f"known issue {md_code_span(d.known_issue)}" if d.known_issue else "no known issue matched"
    return f"{md_text(d.category)} ({known}, confidence {d.confidence:.2f})"


def _markdown(d: FailureDiagnosis) -> str:
    # Logs, check names and messages come from the code under test: every piece is escaped for GitLab markdown.
    out = [f"### Failure analysis: {_md_title(d)}", ""]
    if d.failing_check is not None:
        out += [f"- {md_text(line)}" for line in _structured_lines(d)] + [""]
    out += [md_text(d.explanation), ""]
    if d.waiver:
        out += [f"Waiver: {md_text(_waiver_text(d))}", ""]
    if d.remediation:
        out += ["**What to try**", ""] + [f"{i}. {md_text(step)}" for i, step in enumerate(d.remediation, 1)] + [""]
    if d.matches:
        evidence = [f"{m.source}:{m.line} [{m.rule}] {m.text}" for m in d.matches[:_SHOWN]]
        out += ["**Evidence**", "", md_code_block(evidence), ""]
    if d.failed_checks:
        out += ["**Failed checks**", ""]
        out += [
            f"- {md_code_span(f'{c.stage}/{c.name}')} {md_text(c.status)}: {md_text(_one_line(c.message))}"
            for c in d.failed_checks[:10]
        ]
        out.append("")
    if d.environment:
        env = ", ".join(f"{k}={v}" for k, v in d.environment.items())
        out += [f"**Environment**: {md_text(env)}", ""]
    if d.also_seen:
        seen = ", ".join(f"{s['category']} ({s['rule']}, {s['lines']} lines)" for s in d.also_seen)
        out += [f"Also seen (consequences or noise): {md_text(seen)}", ""]
    if d.links:
        out += ["Links: " + " · ".join(md_link(link, link) for link in d.links), ""]
    if d.bundle:
        out += [f"Reproduction bundle: {md_code_span(d.bundle)}", ""]
    out += [f"Not read to the end: {md_text(_unread(s, n))}" for s, n in d.truncated.items()]
    return "\n".join(out)


def _text(d: FailureDiagnosis) -> list[str]:
    out = [f"failure analysis: {_title(d)}"]
    out += [f"  {line}" for line in _structured_lines(d)]
    out.append(f"  {d.explanation}")
    if d.waiver:
        out.append(f"  waiver: {_waiver_text(d)}")
    if d.remediation:
        out.append("what to try:")
        out += [f"  {i}. {step}" for i, step in enumerate(d.remediation, 1)]
    if d.matches:
        out.append("log evidence:")
    for m in d.matches[:_SHOWN]:
        out.append(f"  {m.source}:{m.line} [{m.rule}] {m.text}")
    for c in d.failed_checks[:10]:
        out.append(f"failed check {c.stage}/{c.name} ({c.status}): {_one_line(c.message)}")
    if d.environment:
        out.append("environment: " + ", ".join(f"{k}={v}" for k, v in d.environment.items()))
    if d.also_seen:
        out.append("also seen: " + ", ".join(f"{s['category']}/{s['rule']}" for s in d.also_seen))
    for link in d.links:
        out.append(f"see: {link}")
    if d.bundle:
        out.append(f"reproduction bundle: {d.bundle}")
    out += [f"not read to the end: {_unread(s, n)}" for s, n in d.truncated.items()]
    return out


def _unread(source: str, read: int) -> str:
    return f"{source}: only its first {read:,} bytes were read (the input budget of one analysis ran out)"


def _waiver_text(d: FailureDiagnosis) -> str:
    w = d.waiver_detail
    if w is None:
        return f"the known issue names gate `{d.waiver}` (pass --gates to check its waiver)"
    if "expires" not in w:
        return f"the known issue names gate `{d.waiver}`, but gates.yaml has no waiver for it"
    state = "EXPIRED on" if w.get("expired") else "until"
    return f"gate `{d.waiver}` is waived ({w.get('reason')}; {w.get('owner')}, {state} {w.get('expires')})"


def _one_line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:200]
