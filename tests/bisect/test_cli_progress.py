"""The CLI's progress: a live line in a terminal, GitLab collapsible sections in a CI log."""

from __future__ import annotations

import io

from gatekeeper.bisect import Event
from gatekeeper.cli.bisect import Printer


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


EVENTS = [
    Event("start", "bisect git: 40 candidates from a to b, expect at most 8 to run", expected=8),
    Event("step", "candidate abc", "abc", 1),
    Event("round", "abc: round 1", "abc", 1),
    Event("decided", "abc: good (latency-median pass)", "abc", 1, decision="good"),
    Event("step", "candidate d\x1b[31mef", "d\x1b[31mef", 2),
    Event("decided", "def: bad (exit 1)", "def", 2, decision="bad"),
    Event("done", "first bad: def"),
]


def _print(stream: io.StringIO) -> str:
    printer = Printer(stream)
    printer.expect(8)
    for event in EVENTS:
        printer(event)
    return stream.getvalue()


def test_a_terminal_gets_one_live_line_and_no_gitlab_markers():
    text = _print(Tty())
    assert "section_start" not in text
    assert "\rbisect: candidate 1/~8: abc: round 1" in text  # rewritten in place
    assert "  abc: good (latency-median pass)\n" in text
    assert "\x1b[31m" not in text  # a hostile label cannot colour or move the terminal
    assert "\\x1b[31m" in text


def test_a_ci_log_gets_one_collapsible_section_per_candidate():
    text = _print(io.StringIO())
    assert "\r" not in text.replace("\r\x1b[0K", "")  # no live line: only GitLab's own markers use \r
    assert text.count("section_start:") == 2
    assert text.count("section_end:") == 2
    assert "section_start:" in text.splitlines()[1]
    assert ":bisect_abc[collapsed=true]" in text
    assert text.index("abc: good") < text.index("section_end:")


def test_the_markers_survive_the_guarded_stdout_of_a_command():
    """``cli.main`` wraps stdout in ``terminal.Guarded``, which shows control characters as ``\\xNN``: the
    printer's own markers pass (GitLab collapses the sections), a label's escape sequence still does not."""
    from gatekeeper.cli.terminal import Guarded

    ci = io.StringIO()
    _print(Guarded(ci))  # type: ignore[arg-type]
    text = ci.getvalue()
    assert text.count("\x1b[0Ksection_start:") == 2
    assert text.count("\x1b[0Ksection_end:") == 2
    assert "\\x1b[0K" not in text
    assert "\x1b[31m" not in text
    assert "\\x1b[31m" in text
    tty = Tty()
    _print(Guarded(tty))  # type: ignore[arg-type]
    assert "\rbisect: candidate 1/~8: abc: round 1" in tty.getvalue()
