"""What several commands share. Showing a verdict (its banner, its table) is the terminal writer's
(``cli/terminal.py``)."""

from __future__ import annotations

__all__ = ["GATES_HELP"]

GATES_HELP = "gates file (default: ./gates.yaml if present, else the built-in default gates)"
