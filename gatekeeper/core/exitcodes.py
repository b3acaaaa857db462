"""The one set of exit codes every gatekeeper command uses (README, "Exit codes")."""

from __future__ import annotations

import enum

__all__ = ["ExitCode"]


class ExitCode(enum.IntEnum):
    PASS = 0
    BLOCKED = 1
    INPUT_ERROR = 2
    WARN = 3
    # The stateful circuit breaker is open: the job short-circuited without
    # spending device time. The CI template maps it to allow_failure exit_codes.
    BREAKER_OPEN = 4
    # A bug in gatekeeper itself (not the user's input): details in a saved log.
    INTERNAL_ERROR = 70
