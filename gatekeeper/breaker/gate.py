"""``breaker check`` as a decision: may this job run, and what to tell the reader.

The order is the policy's: the static pipeline policy (a nightly build on a tag is refused), then
an upstream job a breaker skipped, then an upstream stage that failed on this channel, then this
job's own breaker. On a tag, the protected branch or a merge request into it the stable channel is
never skipped (a release or a merge depends on its gate): an open breaker or an upstream marker is
reported and the job runs. The CLI shows ``lines`` and exits with ``exit_code``; nothing here prints.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.breaker.markers import open_markers, upstream_failure, write_marker
from gatekeeper.breaker.policy import static_policy
from gatekeeper.breaker.state import BreakerConfig, check, state_dir
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["Action", "CheckOutcome", "Line", "check_job"]


class Action(str, enum.Enum):
    RUN = "run"  # the job runs
    RUN_ANYWAY = "run despite open"  # open breaker or upstream marker, but the stable channel on a protected ref
    REFUSED = "refused"  # the static policy forbids it (exit 1)
    SKIPPED_UPSTREAM = "skipped upstream"  # an upstream job was skipped by a breaker, or an upstream stage failed
    SKIPPED_OPEN = "skipped open"  # this job's breaker is open (exit 4)


@dataclass(frozen=True)
class Line:
    text: str
    error: bool = False  # stderr (a refusal, a skip, a warning) rather than stdout


@dataclass(frozen=True)
class CheckOutcome:
    action: Action
    lines: tuple[Line, ...]

    @property
    def exit_code(self) -> ExitCode:
        return {
            Action.REFUSED: ExitCode.BLOCKED,
            Action.SKIPPED_UPSTREAM: ExitCode.BREAKER_OPEN,
            Action.SKIPPED_OPEN: ExitCode.BREAKER_OPEN,
        }.get(self.action, ExitCode.PASS)


_NEVER_SKIP = "on a tag, the protected branch or a merge request into it the breaker never skips the stable channel"


def check_job(
    *,
    channel: str,
    job: str,
    config: BreakerConfig,
    environ: Mapping[str, str],
    policy_only: bool = False,
    protected_branch: str | None = None,
    state: str | None = None,
    artifacts: str | None = None,
    after: Sequence[str] = (),
) -> CheckOutcome:
    """Whether ``job`` of ``channel`` may run now; a skip by this job's breaker leaves a marker in ``artifacts``."""
    policy = static_policy(environ, channel, protected_branch)
    if not policy.allowed:
        return CheckOutcome(Action.REFUSED, (Line(f"gatekeeper: breaker: {policy.message}", error=True),))
    said = [Line(f"gatekeeper: breaker: {policy.message}")]
    never_skip = policy.never_skips(channel)
    # A job after one the breaker skipped is skipped too: the chain of stages
    # (and the gate, which would only see missing data) stops without device time.
    upstream, warnings = open_markers(Path(artifacts), job, channel, environ) if artifacts else ([], [])
    said += [Line(f"gatekeeper: breaker: warning: {w}", error=True) for w in warnings]
    if upstream and never_skip:
        said.append(Line(f"gatekeeper: breaker: upstream {upstream[0]}; ignored: {_NEVER_SKIP}", error=True))
    elif upstream:
        said.append(Line(f"gatekeeper: breaker: skipped: upstream {upstream[0]}", error=True))
        write_marker(artifacts, channel, job, f"skipped after upstream {upstream[0]}", environ)
        return CheckOutcome(Action.SKIPPED_UPSTREAM, tuple(said))
    upstream_failed = upstream_failure(Path(artifacts or "."), after)
    if upstream_failed:
        text = f"gatekeeper: breaker: skipped: upstream {upstream_failed} on this channel; no device time spent"
        said.append(Line(text, error=True))
        return CheckOutcome(Action.SKIPPED_UPSTREAM, tuple(said))
    if policy_only:
        return CheckOutcome(Action.RUN_ANYWAY if upstream else Action.RUN, tuple(said))
    decision = check(state_dir(state, environ), channel, job, config)
    if not decision.allowed and never_skip:
        said.append(
            Line(
                f"gatekeeper: breaker: {decision.message.split('; skipped without')[0]}; running anyway: "
                f"{_NEVER_SKIP} (the gate must decide); the result is still recorded"
            )
        )
        return CheckOutcome(Action.RUN_ANYWAY, tuple(said))
    if not decision.allowed:
        said.append(Line(f"gatekeeper: breaker: {decision.message}", error=True))
        write_marker(artifacts, channel, job, decision.message, environ)
        return CheckOutcome(Action.SKIPPED_OPEN, tuple(said))
    said.append(Line(f"gatekeeper: breaker: {decision.message}"))
    return CheckOutcome(Action.RUN_ANYWAY if upstream else Action.RUN, tuple(said))
