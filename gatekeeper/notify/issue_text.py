"""The text of a regression issue (``gatekeeper.notify.issue``): its hidden signature marker, title,
description and notes, rendered from the payload's data. Every value from artifacts is escaped for GitLab
markdown (``gatekeeper.core.escape``) and the description is redacted before it leaves."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from gatekeeper.contract.bisect_report import signature_key
from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import ZWSP, md_code_span, md_link, md_text, terminal
from gatekeeper.core.redact import redact

__all__ = ["MARKER", "parse_marker", "render_description", "seen_note", "title"]

MARKER = "<!-- gatekeeper:regression:"
_MARKER_RE = re.compile(r"<!-- gatekeeper:regression:([0-9a-f]{16}):([A-Za-z0-9_-]{1,2000}) -->")


def _marker(signature: Mapping[str, Any]) -> str:
    blob = json.dumps({k: signature.get(k) for k in ("metric", "channel", "fingerprint", "culprit")}, sort_keys=True)
    data = base64.urlsafe_b64encode(blob.encode()).decode().rstrip("=")
    return f"{MARKER}{signature_key(signature)}:{data} -->"


def parse_marker(text: str) -> dict[str, Any] | None:
    """The signature in an issue's marker (None: no valid marker; a key that does not match its fields is none)."""
    m = _MARKER_RE.search(text or "")
    if not m:
        return None
    try:
        raw = base64.urlsafe_b64decode(m.group(2) + "=" * (-len(m.group(2)) % 4))
        # an issue's description is GitLab's answer (anyone who can edit the issue wrote it): the strict reader,
        # so brackets nested 1,400 deep in the marker's 2,000 characters are no marker, not exit 70
        sig = files.parse_json(raw, "a GitLab issue's marker", what="issue marker")
    except (binascii.Error, InputError):
        return None
    if not isinstance(sig, dict) or signature_key(sig) != m.group(1):
        return None
    return {k: sig.get(k) for k in ("metric", "channel", "fingerprint", "culprit")}


def title(payload: Mapping[str, Any]) -> str:
    """A title shows text as it is (no markdown), but mentions and references must not fire from it."""
    sig = payload["signature"]
    culprit = str(sig.get("culprit") or "")
    label = culprit.split(":", 1)[-1][:12] if culprit.startswith("git:") else culprit.split(":", 1)[-1]
    where = f"{sig.get('channel') or 'any channel'}, {sig.get('fingerprint')}"
    text = f"Regression in {sig.get('metric')} ({where}) since {label}"
    text = re.sub(r"([@#!&%$~^])(?=[A-Za-z0-9_\"])", "\\1" + ZWSP, terminal(" ".join(text.split()), newlines=False))
    return text.lstrip("/")[:250]


def _changes_md(changes: Mapping[str, Any]) -> list[str]:
    kind = changes.get("kind")
    out: list[str] = []
    if kind == "commits":
        commits = changes.get("commits") or []
        out.append(f"{len(commits)}{'+' if changes.get('more_commits') else ''} commit(s) between them:")
        out.append("")
        out += [f"- {md_code_span(str(c.get('sha', ''))[:12])} {md_text(c.get('subject', ''))}" for c in commits]
    elif kind == "versions":
        out.append(
            f"{md_code_span(changes.get('package', ''))} {md_code_span(changes.get('from', ''))} → "
            f"{md_code_span(changes.get('to', ''))}; installed distributions that differ:"
        )
        out += ["", "| distribution | last good | first bad |", "| --- | --- | --- |"]
        for name, d in (changes.get("installed") or {}).items():
            out.append(f"| {md_text(name)} | {md_text(d.get('from') or '-')} | {md_text(d.get('to') or '-')} |")
    elif kind == "images":
        digests = changes.get("digests") or {}
        out.append(
            f"image digest {md_code_span(digests.get('from') or '?')} → {md_code_span(digests.get('to') or '?')}"
        )
        out += ["", "| what | name | last good | first bad |", "| --- | --- | --- | --- |"]
        for key in ("env", "labels", "packages"):
            for name, d in (changes.get(key) or {}).items():
                out.append(
                    f"| {key} | {md_text(name)} | {md_text(d.get('from') or '-')} | {md_text(d.get('to') or '-')} |"
                )
    elif changes.get("error"):
        out.append(f"what changed could not be read: {md_text(changes['error'])}")
    return out


def render_description(payload: Mapping[str, Any], *, secrets: list[str] | None = None) -> str:
    """The issue's text, redacted; its first line is the marker (the signature, redacted in the payload already:
    the redactor would take the marker's base64 for a token and break it)."""
    sig = payload["signature"]
    links = payload.get("links") or {}
    first = payload["culprits"][0] if payload["culprits"] else {}
    lines = [
        f"## Regression: {md_code_span(sig.get('metric'))} on the {md_code_span(sig.get('channel') or 'any')} "
        f"channel ({md_code_span(sig.get('fingerprint'))})",
        "",
        f"**First bad:** {md_code_span(first.get('first_bad', '?'))} "
        f"(last good {md_code_span(first.get('last_good', '?'))}), "
        f"found by `gatekeeper bisect --provider {md_text(str(payload.get('provider')))}` in "
        f"{payload['summary']['run']} of {payload['summary']['candidates']} candidates.",
        "",
    ]
    for n, c in enumerate(payload["culprits"], 1):
        head = "Change point" if len(payload["culprits"]) == 1 else f"Change point {n}"
        where = f"between {md_code_span(c['last_good'])} and {md_code_span(c['first_bad'])}"
        if not c["exact"]:
            where += f" (undecided in between: {', '.join(md_code_span(u) for u in c['unresolved'])})"
        lines += [f"**{head}:** {where}", "", f"> {md_text(c.get('symptom') or '')}", ""]
    lines += [
        "### Bisection",
        "",
        "| # | candidate | decision | processes | measured | why |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in payload["rows"]:
        lines.append(
            f"| {int(r['index'])} | {md_code_span(r['label'])} | {md_text(r['decision'])} | {int(r['processes'])} | "
            f"{md_text(r['measured'])} | {md_text(r['why'])} |"
        )
    lines += ["", md_text(payload.get("note", "")), ""]
    for n, c in enumerate(payload["culprits"], 1):
        lines += [
            f"### What changed{'' if len(payload['culprits']) == 1 else f' ({n})'}",
            "",
            *_changes_md(c["changes"]),
            "",
        ]
    lines.append("### Reproduce")
    lines.append("")
    bundle = links.get("bundle")
    lines.append(
        f"The {md_link(bundle, 'repro bundle')} recreates the first bad candidate and runs the same check."
        if bundle
        else "The repro bundle is in the bisection job's artifacts (`repro/`)."
    )
    if links.get("pipeline"):
        lines += ["", f"_From {md_link(links['pipeline'], 'this pipeline')}._"]
    return _marker(sig) + "\n" + redact("\n".join(lines), extra=secrets) + "\n"


def seen_note(payload: Mapping[str, Any], what: str, reason: str) -> str:
    links = payload.get("links") or {}
    where = md_link(links.get("pipeline"), "pipeline") if links.get("pipeline") else "a pipeline"
    return f"{what} in {where}: {md_text(reason)}\n"
