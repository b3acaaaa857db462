"""The one way gatekeeper starts a child process: a required timeout, its own
process group, SIGTERM then SIGKILL to the whole group on timeout."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess  # the one place children start: argv lists, no shell, always a timeout  # nosec B404
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcResult", "describe_returncode", "run"]

_GRACE_S = 5.0


@dataclass(frozen=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int | None  # None when it timed out or could not start
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    start_error: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        if self.start_error:
            return f"could not start {self.argv[0]}: {self.start_error}"
        if self.timed_out:
            return f"timed out after {self.duration_s:.0f} s"
        return describe_returncode(self.returncode)


def describe_returncode(code: int | None) -> str:
    if code is None:
        return "did not finish"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exited with code {code}"


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input_text: str | None = None,
) -> ProcResult:
    """Run ``argv`` to completion or until ``timeout`` seconds, capturing text output."""
    import time

    argv = tuple(str(a) for a in argv)
    start = time.monotonic()
    try:
        child = subprocess.Popen(  # argv list, no shell; callers pass fixed tool names  # nosec B603
            argv,
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        return ProcResult(argv, None, "", "", False, 0.0, start_error=exc.strerror or str(exc))
    try:
        out, err = child.communicate(input=input_text, timeout=timeout)
        return ProcResult(argv, child.returncode, out, err, False, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        out, err = kill_group(child)
        return ProcResult(argv, None, out, err, True, time.monotonic() - start)
    except KeyboardInterrupt:
        # The child has its own session, so Ctrl-C did not reach it: end it (and its group) before giving up.
        kill_group(child)
        raise


def kill_group(child: subprocess.Popen) -> tuple[str, str]:
    """SIGTERM the child's process group, SIGKILL after a grace period; return its output."""
    for sig, wait in ((signal.SIGTERM, _GRACE_S), (signal.SIGKILL, _GRACE_S)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, sig)
        try:
            out, err = child.communicate(timeout=wait)
            _reap_group(child.pid)
            return out or "", err or ""
        except subprocess.TimeoutExpired:
            continue
    return "", ""


def _reap_group(pgid: int) -> None:
    # Grandchildren that outlived the child still belong to its group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_passthrough(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> ProcResult:
    """Like ``run``, but the child writes straight to our stdout/stderr (live progress); nothing is captured."""
    import time

    argv = tuple(str(a) for a in argv)
    start = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        child = subprocess.Popen(  # argv list, no shell; callers pass fixed tool names  # nosec B603
            argv, stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True
        )
    except OSError as err:
        return ProcResult(argv, None, "", "", False, 0.0, start_error=err.strerror or str(err))
    try:
        child.wait(timeout=timeout)
        return ProcResult(argv, child.returncode, "", "", False, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        kill_group(child)
        return ProcResult(argv, None, "", "", True, time.monotonic() - start)
    except KeyboardInterrupt:
        kill_group(child)
        raise
