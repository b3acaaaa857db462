"""The Slack Block Kit message for an alert, within Block Kit's limits.

Limits (https://api.slack.com/reference/block-kit/blocks): 50 blocks per
message, 3000 characters per section text, 150 per header. Long content is
cut with a link to the full report, never rejected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gatekeeper.contract.verdict import GateResult, Outcome
from gatekeeper.core.escape import slack_code, slack_code_block, slack_link, slack_text, terminal
from gatekeeper.evaluate.outputs import no_gpu_line
from gatekeeper.notify.alert import Alert

__all__ = ["HEADER_MAX", "MAX_BLOCKS", "SECTION_MAX", "build_message"]

MAX_BLOCKS = 50
SECTION_MAX = 3000
HEADER_MAX = 150
_LINE_MAX = 600  # one gate line; keeps one runaway reason from eating a section
_EMOJI = {"critical": ":rotating_light:", "warning": ":warning:", "info": ":white_check_mark:"}
_WORD = {"pass": "passed", "warn": "passed with warnings", "blocked": "BLOCKED", "error": "ERROR"}  # not a password  # nosec B105


def _cut(text: str, limit: int, more_url: str | None) -> str:
    if len(text) <= limit:
        return text
    suffix = "… " + slack_link(more_url, "(truncated: full report)") if more_url else "… (truncated)"
    head = text[: max(limit - len(suffix) - 3, 0)]
    head = re.sub(r"&[a-z]*$", "", head)  # never half an entity
    if head.count("```") % 2:
        head += "```"  # a cut inside a code block closes it
    return head + suffix


def _section(text: str, more_url: str | None) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, SECTION_MAX, more_url)}}


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    # the unit comes from the artifact like any other text (tests/security/test_matrix.py planted markup in it)
    return f"{value:.4g} {slack_text(unit)}".strip() if unit not in ("ratio", "bool") else f"{value:.4g}"


def gate_line(g: GateResult) -> str:
    parts = [f"{_num(g.value, g.unit)}", f"rule `{slack_code(g.rule)}`" if g.rule else ""]
    if g.baseline_value is not None:
        parts.append(f"baseline {_num(g.baseline_value, g.unit)}")
    if g.change is not None:
        parts.append(f"change {g.change * 100:+.1f}%")
    numbers = ", ".join(p for p in parts if p)
    tag = (
        "" if g.blocking else (" (advisory)" if g.severity == "advisory" else " (shadow)" if g.mode == "shadow" else "")
    )
    line = f"• *{slack_text(g.name)}*{tag} {g.outcome.value}: {numbers} — {slack_text(g.reason)}"
    return re.sub(r"&[a-z]*$", "", line[:_LINE_MAX])


def _gate_sections(gates: list[GateResult], more_url: str | None) -> list[dict[str, Any]]:
    sections: list[str] = []
    current = f"*Gates not passing ({len(gates)})*"
    for g in gates:
        line = gate_line(g)
        if len(current) + 1 + len(line) > SECTION_MAX:
            sections.append(current)
            current = line
        else:
            current += "\n" + line
    sections.append(current)
    return [_section(s, more_url) for s in sections]


def _diagnosis_sections(analysis: Mapping[str, Any], more_url: str | None) -> list[dict[str, Any]]:
    known = (
        f"known issue `{slack_code(analysis['known_issue'])}`"
        if analysis.get("known_issue")
        else "no known issue matched"
    )
    if analysis.get("decided_by") == "artifacts":
        known = "from the artifacts"
    category = slack_code(str(analysis.get("category")))
    head = f"*Diagnosis:* `{category}` ({known}, confidence {analysis.get('confidence', 0):.2f})"
    text = head
    if analysis.get("failing"):
        text += "\n*Failing check:* " + slack_text(str(analysis["failing"])[:600])
    text += "\n" + slack_text(str(analysis.get("explanation", ""))[:1500], multiline=True)
    first = (analysis.get("matches") or [{}])[0]
    if first.get("text"):
        where = f"{first.get('source', '')}:{first.get('line', '')}"
        text += "\n" + slack_code_block([f"{where}: {str(first['text'])[:300]}"])
    blocks = [_section(text, more_url)]
    steps = [slack_text(s) for s in analysis.get("remediation", [])]
    if steps:
        blocks.append(_section("*What to try*\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1)), more_url))
    return blocks


def build_message(alert: Alert, *, kind: str, severity: str) -> dict[str, Any]:
    """``{"text", "blocks"}`` for a webhook or chat.postMessage."""
    v = alert.verdict
    more = alert.links.report or alert.links.pipeline
    if kind == "recovered":
        title = (
            f"{_EMOJI['info']} gatekeeper: recovered, {_WORD.get(v.result, v.result)} — {alert.project} {alert.where}"
        )
    else:
        word = _WORD.get(v.result, v.result)
        still = " (still failing)" if kind == "repeat" else ""
        title = f"{_EMOJI.get(severity, '')} gatekeeper {word}{still} — {alert.project} {alert.where}"
    title = " ".join(terminal(title, newlines=False).split())  # plain_text: no markup, but no escape sequences
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(title, HEADER_MAX, None), "emoji": True}}
    ]
    env = v.environment
    facts = [
        f"*Severity:* {slack_text(severity)}",
        f"*Verdict:* {slack_text(v.result)}",
        f"*Channel:* {slack_text(v.channel)}",
        f"*Where:* {slack_text(alert.where)}",
    ]
    if alert.commit:
        facts.append(f"*Commit:* `{slack_code(alert.commit[:12])}`")
    device = env.get("device_name") or env.get("device_kind")
    if env.get("torch_version") or device:
        stack = f"torch {env.get('torch_version', '?')} · {device or '?'} {env.get('gfx_arch') or ''}"
        facts.append(f"*Stack:* {slack_text(stack)}")
    gpu = f"\n:warning: *{slack_text(no_gpu_line(v))}*" if not v.gpu_verified else ""
    blocks.append(_section(" · ".join(facts) + "\n" + slack_text(v.summary, multiline=True) + gpu, more))
    if kind != "recovered":
        bad = [g for g in v.gates if g.blocking] + [
            g for g in v.gates if not g.blocking and g.outcome in (Outcome.FAIL, Outcome.WARN, Outcome.INCONCLUSIVE)
        ]
        if bad:
            blocks += _gate_sections(bad, more)
        if alert.analysis:
            blocks += _diagnosis_sections(alert.analysis, more)
    links = alert.links.items()
    link_block = _section(" · ".join(slack_link(url, name) for name, url in links), more) if links else None
    budget = MAX_BLOCKS - (1 if link_block else 0)
    if len(blocks) > budget:
        dropped = len(blocks) - (budget - 1)
        see = f": see {slack_link(more, 'the full report')}" if more else ""
        note = f"… {dropped} more section(s) not shown{see}"
        blocks = [*blocks[: budget - 1], _section(note, None)]
    if link_block:
        blocks.append(link_block)
    return {"text": _cut(slack_text(title), SECTION_MAX, None), "blocks": blocks}
