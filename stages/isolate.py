"""Run risky device work in a child process, so that a segfault, an abort or a
hang becomes a failed check with the signal or the timeout, and the stage goes on.

One ``Worker`` serves many calls (a process start and ``import torch`` per case
would cost more than most cases); it is restarted only after a crash or a timeout.
The function must be importable by name (``module:function``) and its arguments
and result picklable.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing as mp
import os
import signal
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gatekeeper.core.proc import describe_returncode

__all__ = ["IsolatedOutcome", "Worker", "run_isolated"]

OutcomeKind = Literal["ok", "raised", "crashed", "timeout"]


@dataclass(frozen=True)
class IsolatedOutcome:
    kind: OutcomeKind
    value: Any = None
    message: str = ""
    error_type: str = ""  # for "raised": the exception class name (AssertionError = a failed check)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def _resolve(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _serve(conn: Any, env: Mapping[str, str]) -> None:
    # Own process group: a timeout kills the worker and anything it started.
    os.setsid()
    os.environ.update(env)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        target, args, kwargs = msg
        try:
            value = _resolve(target)(*args, **kwargs)
            conn.send(("ok", value, "", ""))
        except BaseException as err:
            tb = traceback.format_exc(limit=8)
            conn.send(("raised", None, f"{type(err).__name__}: {err}\n{tb}", type(err).__name__))


class Worker:
    """A long-lived child that runs ``module:function`` calls one at a time."""

    def __init__(self, *, env: Mapping[str, str] | None = None, start_timeout: float = 120.0) -> None:
        self._env = dict(env or {})
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None
        self.start_timeout = start_timeout
        self.restarts = 0
        self._started = False

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, args=(child, self._env), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent

    def call(self, target: str, *args: Any, timeout: float, **kwargs: Any) -> IsolatedOutcome:
        if self._proc is None or not self._proc.is_alive():
            if self._started:
                self.restarts += 1
            self._start()
            self._started = True
        start = time.monotonic()
        try:
            self._conn.send((target, args, kwargs))
        except (BrokenPipeError, OSError):
            return self._crashed(start)
        try:
            ready = self._conn.poll(timeout)
        except (EOFError, OSError):
            return self._crashed(start)
        if not ready:
            self._kill()
            return IsolatedOutcome(
                "timeout", message=f"timed out after {timeout:g} s", duration_s=time.monotonic() - start
            )
        try:
            kind, value, message, etype = self._conn.recv()
        except (EOFError, OSError):
            return self._crashed(start)
        return IsolatedOutcome(kind, value, message, etype, time.monotonic() - start)

    def _crashed(self, start: float) -> IsolatedOutcome:
        self._proc.join(timeout=10)
        code = self._proc.exitcode
        self._kill()
        return IsolatedOutcome(
            "crashed", message=f"worker {describe_returncode(code)}", duration_s=time.monotonic() - start
        )

    def _kill(self) -> None:
        if self._proc is None:
            return
        pid = self._proc.pid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            self._proc.join(timeout=3)
            if not self._proc.is_alive():
                break
        with contextlib.suppress(ProcessLookupError, PermissionError):  # grandchildren left in the group
            os.killpg(pid, signal.SIGKILL)
        self._proc = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(timeout=5)
            except (BrokenPipeError, OSError):
                pass
        self._kill()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_isolated(
    target: str, *args: Any, timeout: float, env: Mapping[str, str] | None = None, **kwargs: Any
) -> IsolatedOutcome:
    """One call in a fresh child (for work that must not share a process)."""
    with Worker(env=env) as worker:
        return worker.call(target, *args, timeout=timeout, **kwargs)
