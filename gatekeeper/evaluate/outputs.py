"""Render a Verdict for its readers: verdict.md (merge request), gates.junit.xml
(GitLab's MR test widget), metrics.txt (GitLab's metrics report) and the banner."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gatekeeper.contract.verdict import GateResult, Outcome, Verdict
from gatekeeper.core.escape import md_code_block, md_code_span, md_text, shell_join, terminal_lines, xml_text
from gatekeeper.evaluate.point_gates import SweepTable, split_results, sweep_tables

__all__ = ["OUTPUTS", "banner", "no_gpu_line", "sweep_markdown", "to_junit", "to_markdown", "to_metrics_txt"]

# Every file evaluate writes into --out, verdict.json first: evaluate removes them all before it reads
# any input, so a failed run leaves no verdict (of an earlier run, or planted) behind.
OUTPUTS = ("verdict.json", "verdict.md", "gates.junit.xml", "metrics.txt")

_ICON = {
    Outcome.PASS: "✅ pass",
    Outcome.WARN: "⚠️ warn",
    Outcome.FAIL: "❌ fail",
    Outcome.INCONCLUSIVE: "❔ inconclusive",
    Outcome.WAIVED: "🏷️ waived",
    Outcome.SKIPPED: "⏭️ skipped",
}
_HEADLINE = {"pass": "✅ PASSED", "warn": "⚠️ PASSED WITH WARNINGS", "blocked": "⛔ BLOCKED"}  # not a password  # nosec B105


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    text = f"{value:.4g}"
    return f"{text} {unit}".strip() if unit and unit not in ("ratio", "bool") else text


def _change(change: float | None) -> str:
    return "—" if change is None else f"{change * 100:+.1f}%"


def _cell(text: str) -> str:
    return md_text(text)  # escapes the table's "|" too


def _order(g: GateResult) -> int:
    if g.blocking:
        return 0
    return {Outcome.FAIL: 1, Outcome.WARN: 2, Outcome.INCONCLUSIVE: 3, Outcome.WAIVED: 4, Outcome.PASS: 5}.get(
        g.outcome, 6
    )


def no_gpu_line(v: Verdict) -> str:
    """One sentence for a verdict whose stages ran on a CPU ("" for a GPU verdict)."""
    if v.gpu_verified:
        return ""
    kind = v.environment.get("device_kind") or "unknown"
    return f"Not a GPU verdict: the stages ran on {kind}, so nothing here was checked on a GPU."


def reproduce_command(
    *,
    artifacts: str | Path,
    gates: str | Path,
    channel: str,
    baseline: str | None = None,
    stages: Sequence[str] = (),
    gates_ref: str | None = None,
) -> str:
    """The ``gatekeeper evaluate`` line that gives this verdict again from the same artifacts and store."""
    argv = ["gatekeeper", "evaluate", "--artifacts", str(artifacts), "--gates", str(gates), "--channel", channel]
    if baseline:
        argv += ["--baseline", baseline]
    if stages:
        argv += ["--stages", ",".join(stages)]  # the other stages were left out on purpose: their gates skip
    if gates_ref:
        argv += ["--gates-ref", gates_ref]
    return shell_join([*argv, "--out", str(artifacts)])  # redacted, then quoted (a verdict's gates_file is input)


def to_markdown(v: Verdict, reproduce: str | None = None) -> str:
    """verdict.md; ``reproduce``: the command that made it (default: from the verdict's gates file and channel)."""
    ctx = v.context
    env = v.environment
    where = ctx.get("tag") or (
        f"!{ctx['mr_iid']} → {ctx.get('target_branch')}" if ctx.get("mr_iid") else ctx.get("ref")
    )
    device = env.get("gfx_arch") or env.get("compute_capability") or env.get("device_kind", "?")
    lines = [
        f"## gatekeeper: {_HEADLINE[v.result]}",
        "",
        md_text(v.summary),
        "",
        *([f"> ⚠️ **{md_text(no_gpu_line(v))}**", ""] if not v.gpu_verified else []),
        *([f"> ⚠️ {md_text(w)}" for w in v.warnings] + [""] if v.warnings else []),
        f"channel **{md_text(v.channel)}** · torch {md_code_span(env.get('torch_version', '?'))} · device "
        f"{md_code_span(env.get('device_name') or '?')} ({md_code_span(device)}) · ROCm "
        f"{md_code_span(env.get('rocm_version') or '—')}" + (f" · {md_text(str(where))}" if where else ""),
    ]
    lines += _compared_with(v)
    plain, points = split_results(v.gates)
    if plain or not points:
        lines += [
            "",
            "| gate | outcome | value | rule | baseline | change | why |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
    for g in sorted(plain, key=_order):
        name = f"**{md_text(g.name)}**" if g.blocking else md_text(g.name)
        tag = " (advisory)" if g.severity == "advisory" else (" (shadow)" if g.mode == "shadow" else "")
        lines.append(
            f"| {name}{tag} | {_ICON[g.outcome]} | {md_text(_num(g.value, g.unit))} | {md_code_span(g.rule)} | "
            f"{md_text(_num(g.baseline_value, g.unit))} | {_change(g.change)} | {_cell(g.reason)} |"
        )
    lines += sweep_markdown(points)
    if v.waived_checks:
        lines += ["", f"**Waived checks ({len(v.waived_checks)})**", ""]
        for w in v.waived_checks[:30]:
            ticket = f", {w.waiver.get('ticket')}" if w.waiver.get("ticket") else ""
            owner = f"{w.waiver['owner']}{ticket}, until {w.waiver['expires']}"
            lines.append(f"- {md_code_span(f'{w.stage}.{w.check}')}: {md_text(w.waiver['reason'])} ({md_text(owner)})")
    if v.expired_waivers:
        lines += ["", "**Expired waivers** (no longer applied)", ""]
        lines += [f"- {md_text(w['message'])}" for w in v.expired_waivers]
    lines += [
        "",
        "<details><summary>Reproduce</summary>",
        "",
        md_code_block(
            [
                reproduce
                or reproduce_command(artifacts="artifacts", gates=v.gates_file or "gates.yaml", channel=v.channel)
            ],
            "sh",
        ),
        "",
        "</details>",
        "",
    ]
    return "\n".join(lines)


def _compared_with(v: Verdict) -> list[str]:
    """Which runs the comparisons used: each stage's baseline and, beside it, its anchor (run, ref, commit, date)."""
    from gatekeeper.evaluate.history_gate import anchor_words

    lines = []
    for stage in sorted(set(v.baselines) | set(v.anchors)):
        if stage in v.baselines:
            lines.append(f"- {md_code_span(stage)} baseline: {md_text(anchor_words(v.baselines[stage]))}")
        if stage in v.anchors:
            lines.append(f"- {md_code_span(stage)} anchor: {md_text(anchor_words(v.anchors[stage]))}")
    return ["", "**Compared with**", "", *lines] if lines else []


def sweep_markdown(points: list[GateResult], *, max_reasons: int = 20) -> list[str]:
    """Gates on ``metric[*]`` as one table per sweep: a row per point, a column per gate; then why
    each point that did not pass did not."""
    lines: list[str] = []
    for table in sweep_tables(points):
        n = len(table.rows)
        lines += ["", f"**Sweep** ({n} points of {_cell(', '.join(table.keys))}; each point judged on its own)", ""]
        heads = [
            *map(_cell, table.keys),
            *(f"{_cell(g)} (advisory)" if _advisory(table, g) else _cell(g) for g in table.gates),
        ]
        lines += ["| " + " | ".join(heads) + " |", "|" + " --- |" * len(heads)]
        for point, results in table.rows:
            cells = [_cell(point[k]) for k in table.keys]
            for gate in table.gates:
                r = results.get(gate)
                cells.append("—" if r is None else _point_cell(r))
            lines.append("| " + " | ".join(cells) + " |")
        bad = [r for _, results in table.rows for r in results.values() if r.outcome is not Outcome.PASS]
        if bad:
            lines.append("")
            lines += [
                f"- {md_code_span(r.name)} {_ICON[r.outcome]}: {_cell(r.reason)}"
                for r in sorted(bad, key=_order)[:max_reasons]
            ]
            if len(bad) > max_reasons:
                lines.append(f"- … and {len(bad) - max_reasons} more (verdict.json has every point)")
    return lines


def _advisory(table: SweepTable, gate: str) -> bool:
    return any(r.severity == "advisory" for _, results in table.rows for g, r in results.items() if g == gate)


def _point_cell(r: GateResult) -> str:
    text = f"{_ICON[r.outcome]} {_num(r.value, r.unit)}"
    if r.change is not None:
        text += f" ({_change(r.change)})"
    return f"**{text}**" if r.blocking else text


def to_junit(v: Verdict) -> bytes:
    """gates.junit.xml: a test case per gate and per waived check, for GitLab's test report.

    Written with the standard library's ElementTree (what junitparser builds on), not junitparser as the
    stages' files are (``stage_report.write_junit``): importing junitparser looks its own version up among
    the installed distributions (importlib.metadata, email, csv, socket), 1.5 MB of resident memory that
    evaluate, which runs on every pipeline, would pay for one flat suite. The elements and attributes are
    the ones junitparser writes; tests/evaluate/test_render.py reads the file back with junitparser.
    """
    from xml.etree import ElementTree as ET  # builds our own tree; never parses input  # nosec B405

    x = xml_text  # every string from a gate, a check or a waiver, so the file stays XML 1.0
    cases: list[ET.Element] = []

    def case(name: str, classname: str, result: tuple[str, str, str | None] | None, out: str | None) -> None:
        el = ET.Element("testcase", {"name": x(name), "classname": classname})
        if result is not None:
            tag, message, kind = result
            ET.SubElement(el, tag, {"message": x(message)} | ({"type": kind} if kind else {}))
        if out is not None:
            ET.SubElement(el, "system-out").text = x(out)
        cases.append(el)

    for g in v.gates:
        detail = f"{g.reason}\nmetric: {g.metric}\nrule: {g.rule}\nseverity: {g.severity}, mode: {g.mode}"
        if g.blocking:
            case(g.name, "gatekeeper.gates", ("failure", g.reason[:500], "gate"), detail)
        elif g.outcome is Outcome.PASS:
            case(g.name, "gatekeeper.gates", None, detail)
        else:
            label = "advisory fail" if g.outcome is Outcome.FAIL else g.outcome.value
            if g.outcome is Outcome.WAIVED and g.waiver:
                label = _waiver_text(g.waiver)
            case(g.name, "gatekeeper.gates", ("skipped", f"{label}: {g.reason}"[:1000], None), detail)
    for w in v.waived_checks:
        case(f"{w.stage}.{w.check}", "gatekeeper.waived", ("skipped", _waiver_text(w.waiver), None), w.message)
    counts = {tag: sum(1 for c in cases if c.find(tag) is not None) for tag in ("error", "failure", "skipped")}
    suite = ET.Element(
        "testsuite",
        {
            "name": "gatekeeper.gates",
            "timestamp": x(v.generated_at),
            "tests": str(len(cases)),
            "errors": str(counts["error"]),
            "failures": str(counts["failure"]),
            "skipped": str(counts["skipped"]),
            "time": "0",  # a gate has no duration; junitparser writes the sum of none as 0 too
        },
    )
    suite.extend(cases)
    root = ET.Element("testsuites")
    root.append(suite)
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="utf-8")


def _waiver_text(w: Mapping[str, Any]) -> str:
    return f"waived: {w['reason']} (owner {w['owner']}, ticket {w.get('ticket') or '—'}, until {w['expires']})"


_NAME = re.compile(r"[^a-zA-Z0-9_]")


def to_metrics_txt(v: Verdict) -> str:
    """GitLab metrics report: one ``name value`` line per gate value (and its baseline change)."""
    out = [f"gatekeeper_result {({'pass': 0, 'blocked': 1, 'warn': 3})[v.result]}"]  # verdict words  # nosec B105
    for g in v.gates:
        if g.value is None:
            continue
        name = _NAME.sub("_", f"gate_{g.name}")
        out.append(f"{name} {g.value:.6g}")
        if g.change is not None:
            out.append(f"{name}_change_pct {g.change * 100:.3g}")
    return "\n".join(out) + "\n"


def banner(v: Verdict) -> str:
    """The short text printed before a non-zero exit."""
    # Names and reasons come from the code under test (a failing check's name is in a count gate's reason): no
    # escape sequence reaches the terminal, and no newline in one starts a line of the job log that analyze
    # would read as gatekeeper's own (terminal_lines).
    gpu = [f"gatekeeper: {no_gpu_line(v)}"] if not v.gpu_verified else []
    if v.result == "pass":
        return terminal_lines([f"gatekeeper: PASSED. {v.summary}", *gpu])
    head = "BLOCKED" if v.result == "blocked" else "PASSED WITH WARNINGS"
    gates = v.blocking_gates if v.result == "blocked" else v.warning_gates
    lines = ["=" * 72, f"gatekeeper: {head}. {v.summary}"]
    lines += [f"  - {g.name}: {g.reason}" for g in gates]
    lines += [f"  - warning: {w}" for w in v.warnings]
    lines += gpu
    lines.append("=" * 72)
    return terminal_lines(lines)
