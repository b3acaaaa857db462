"""The one terminal writer: every character gatekeeper shows on stdout or stderr leaves through here.

Check names, messages, device names, log lines and diagnoses come from the code under test, captures and
third-party tools (docs/security.md). Written raw, an ESC sequence recolours or rewrites a CI log or a
terminal, an OSC 8 sequence hides a link, BEL rings, a C1 ``0x9b`` starts a sequence on terminals that
take 8-bit controls, and a bidi override (U+202E, U+2067) reorders what the reader sees. Here every such
character is shown as ``\\xNN``/``\\uNNNN`` (``gatekeeper.core.escape.terminal``); tab and newline are kept.

Library code never writes to the terminal: it returns values, or hands lines to a ``log`` callback that
the command passes in (``err`` or ``out`` below). ``tests/security/test_terminal.py`` scans every module
outside ``gatekeeper/cli`` for ``print``, ``sys.stdout``/``sys.stderr`` writes and loggers, and fails on one.

The streams are looked up at each call (``sys.stdout`` then is the CLI's redacting wrapper, or a test's
capture). A verdict is shown to a terminal by ``verdict_table``: plain columns fitted to the terminal's
width and the reasons below them; markdown stays for verdict.md and the merge-request note.
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from gatekeeper.core.escape import terminal
from gatekeeper.core.redact import RedactingStream

if TYPE_CHECKING:
    from gatekeeper.contract.verdict import GateResult, Verdict

__all__ = ["Guarded", "err", "out", "out_json", "out_json_text", "show_banner", "verdict_table", "warnings"]


class Guarded:
    """``sys.stdout``/``sys.stderr`` while a command runs (``cli.main`` installs it): whatever is written, by
    this module or by anything that bypasses it (argparse's usage errors quote the arguments), is redacted and
    shown with ``\\xNN`` escapes. ``terminal`` is idempotent, so text ``out`` escaped passes unchanged."""

    def __init__(self, stream: Any) -> None:
        self._stream = RedactingStream(stream)

    def write(self, text: str) -> int:
        self._stream.write(terminal(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding...
        return getattr(self._stream, name)


def write_controls(stream: Any, text: str) -> None:
    """Write ``text`` past ``Guarded``'s escaping (still redacted): only for text a command composed from its
    own control sequences (GitLab's ``section_start`` markers, a live line's carriage return) and parts it has
    already escaped with ``terminal``. Through ``Guarded`` those markers would show as ``\\x1b[0K`` and never
    collapse."""
    target = stream._stream if isinstance(stream, Guarded) else stream
    target.write(text)
    target.flush()


def _write(stream: Any, text: str, end: str) -> None:
    stream.write(terminal(str(text)) + end)
    stream.flush()  # a child process (a stage) may write to the same terminal next


def out(text: str = "", *, end: str = "\n") -> None:
    """A line (or several) on stdout, control characters shown as ``\\xNN``."""
    _write(sys.stdout, text, end)


def err(text: str, *, end: str = "\n") -> None:
    """A line (or several) on stderr: warnings, progress beside machine output, errors."""
    _write(sys.stderr, text, end)


def warnings(lines: Iterable[object]) -> None:
    """One ``gatekeeper: warning:`` line on stderr each, every value escaped on its own line (a skipped record is
    named by its recorded ref and commit, which may hold a newline)."""
    for line in lines:
        err(f"gatekeeper: warning: {terminal(str(line), newlines=False)}")


def out_json(obj: Any, *, indent: int | None = 2) -> None:
    """``obj`` as JSON on stdout: ASCII only (``\\uNNNN`` escapes, DEL too), so nothing in it is a control
    character and the text stays valid JSON."""
    text = json.dumps(obj, indent=indent, ensure_ascii=True, default=str).replace("\x7f", "\\u007f")
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def out_json_text(text: str, *, indent: int | None = 2) -> None:
    """JSON text a library rendered (``--format json``), shown like ``out_json``: parsed and written again as
    ASCII, so a raw C1 or bidi character in it becomes a JSON escape instead of a broken ``\\xNN``."""
    out_json(json.loads(text), indent=indent)


def show_banner(verdict: Verdict) -> int:
    """The verdict's banner (stdout for a pass, stderr otherwise); returns the verdict's exit code."""
    from gatekeeper.evaluate.outputs import banner

    (out if verdict.result == "pass" else err)(banner(verdict))
    return int(verdict.exit_code)


# ------------------------------------------------------------------ the verdict for a terminal

_HEADLINE = {"pass": "PASSED", "warn": "PASSED WITH WARNINGS", "blocked": "BLOCKED"}  # verdict words  # nosec B105
# (heading, the narrowest the column may become); the outcome is never cut. On a narrow terminal the last
# columns are left out before any column is cut below its minimum: change, then baseline, then rule.
_COLUMNS = (("gate", 12), ("outcome", 0), ("value", 8), ("rule", 8), ("baseline", 8), ("change", 7))
_DROPPABLE = 3  # change, baseline, rule
_MIN_WIDTH = 40


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:.4g}"
    return f"{text} {unit}".strip() if unit and unit not in ("ratio", "bool") else text


def _change(change: float | None) -> str:
    return "-" if change is None else f"{change * 100:+.1f}%"


_RANK = ("fail", "warn", "inconclusive", "waived", "pass", "skipped")  # after the blocking gates, in this order


def _order(g: GateResult) -> tuple[int, str]:
    rank = _RANK.index(g.outcome.value) + 1 if g.outcome.value in _RANK else len(_RANK) + 1
    return (0 if g.blocking else rank, g.name)


def _outcome(g: GateResult) -> str:
    if g.blocking:
        return "FAIL (blocks)"
    word = g.outcome.value
    if word in ("pass", "skipped", "waived"):
        return word
    return f"{word} (shadow)" if g.mode == "shadow" else f"{word} (advisory)" if g.severity == "advisory" else word


def _row(g: GateResult) -> list[str]:
    cells = [g.name, _outcome(g), _num(g.value, g.unit), g.rule or "-", _num(g.baseline_value, g.unit)]
    return [terminal(c, newlines=False) for c in [*cells, _change(g.change)]]


def _fit(natural: list[int], total: int) -> list[int]:
    """Column widths that fit ``total`` characters (two spaces between columns): the column with the most
    room above its minimum gives way first; the outcome column never does."""
    widths = list(natural)
    floors = [min(n, m) if m else n for n, (_, m) in zip(natural, _COLUMNS, strict=False)]
    while sum(widths) + 2 * (len(widths) - 1) > total:
        i = max(range(len(widths)), key=lambda k: widths[k] - floors[k])
        if widths[i] <= floors[i]:
            break
        widths[i] -= 1
    return widths


def _cell(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: max(width - 3, 1)] + "..."


def _table(rows: Sequence[Sequence[str]], total: int) -> list[str]:
    """The rows as columns fitted to ``total``; trailing columns left out while even their minimums do not fit."""
    columns = len(rows[0])
    for _ in range(_DROPPABLE):
        floors = [min(max(len(r[i]) for r in rows), _COLUMNS[i][1] or 10**6) for i in range(columns)]
        if sum(floors) + 2 * (columns - 1) <= total:
            break
        columns -= 1
    rows = [r[:columns] for r in rows]
    widths = _fit([max(len(r[i]) for r in rows) for i in range(columns)], total)
    return ["  ".join(_cell(c, w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _wrapped(first: str, text: str, width: int, indent: int = 6) -> list[str]:
    """``first`` + ``text`` wrapped to ``width``, continuation lines indented; long words are broken."""
    return textwrap.wrap(
        first + terminal(text, newlines=False),
        width=max(width, _MIN_WIDTH),
        subsequent_indent=" " * indent,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def verdict_table(verdict: Verdict, *, width: int | None = None) -> str:
    """The verdict as a terminal shows it: headline, context, a table fitted to ``width`` (default: the
    terminal's, ``shutil.get_terminal_size``) and, below it, why each gate that did not pass did not."""
    from gatekeeper.evaluate.outputs import no_gpu_line

    total = max(width or shutil.get_terminal_size((100, 24)).columns, _MIN_WIDTH)
    env = verdict.environment
    device = env.get("gfx_arch") or env.get("compute_capability") or env.get("device_kind", "?")
    lines = [f"gatekeeper: {_HEADLINE.get(verdict.result, verdict.result)}"]
    lines += _wrapped("", verdict.summary, total, 0)
    if not verdict.gpu_verified:
        lines += _wrapped("note: ", no_gpu_line(verdict), total)
    context = (
        f"channel {verdict.channel} | torch {env.get('torch_version', '?')} | device "
        f"{env.get('device_name') or '?'} ({device}) | ROCm {env.get('rocm_version') or '-'}"
    )
    lines += _wrapped("", context, total, 0)
    gates = sorted(verdict.gates, key=_order)
    if gates:
        lines += ["", *_table([[h for h, _ in _COLUMNS], *(_row(g) for g in gates)], total)]
    why = [g for g in gates if g.outcome.value not in ("pass", "skipped")]
    if why:
        lines += ["", "why:"]
        for g in why:
            lines += _wrapped(f"  {terminal(g.name, newlines=False)}: ", g.reason, total)
    for w in verdict.warnings:
        lines += _wrapped("  warning: ", w, total)
    return "\n".join(lines)
