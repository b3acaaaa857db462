"""What several commands share. Showing a verdict (its banner, its table) is the terminal writer's
(``cli/terminal.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gatekeeper.cli import terminal

if TYPE_CHECKING:
    from gatekeeper.contract.verdict import Verdict

__all__ = ["GATES_HELP", "print_verdict"]

GATES_HELP = "gates file (default: ./gates.yaml if present, else the built-in default gates)"


def print_verdict(verdict: Verdict) -> int:
    """The verdict's banner through the terminal writer; its exit code (kept for the commands that call it)."""
    return terminal.show_banner(verdict)
