"""InputError: the only exception that means "the user's input is wrong"."""

from __future__ import annotations

from pathlib import Path

__all__ = ["InputError"]


class InputError(Exception):
    """Bad input: a file, a place in it, and how to fix it.

    cli.main catches it in one place, prints ``str(err)`` as one line and
    exits with ExitCode.INPUT_ERROR.
    """

    def __init__(self, path: str | Path | None, where: str, problem: str, hint: str = "") -> None:
        self.path = str(path) if path is not None else None
        self.where = where
        self.problem = problem
        self.hint = hint
        super().__init__(self.line())

    def line(self) -> str:
        head = self.path or "<input>"
        if self.where:
            head = f"{head}:{self.where}"
        text = f"{head}: {self.problem}"
        if self.hint:
            text += f"; hint: {self.hint}"
        return " ".join(text.split())
