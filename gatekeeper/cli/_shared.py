"""What several commands share: printing a verdict's banner and mapping it to the exit code."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gatekeeper.contract.verdict import Verdict

__all__ = ["GATES_HELP", "print_verdict"]

GATES_HELP = "gates file (default: ./gates.yaml if present, else the built-in default gates)"


def print_verdict(verdict: Verdict) -> int:
    from gatekeeper.evaluate.outputs import banner

    print(banner(verdict), file=sys.stderr if verdict.result != "pass" else sys.stdout)
    return int(verdict.exit_code)
