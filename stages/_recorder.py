"""The recorder of a stage run: the checks and metrics a stage records, each against the kinds it declares
(a check or a metric no kind covers is refused), with the failure category of every failed check."""

from __future__ import annotations

import contextlib
import re
import sys
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gatekeeper.contract.failures import (
    CONFIG_CHECK,
    CONFIG_FIX,
    CheckKind,
    MetricKind,
    UndeclaredName,
    crash_category,
    find_kind,
)
from gatekeeper.contract.stage_report import Check, Metric
from stages.isolate import IsolatedOutcome
from stages.progress import section

__all__ = ["FRAMEWORK_CHECKS", "Recorder", "SkipCheck", "declared_kinds"]


class SkipCheck(Exception):
    """Raised inside a check: it could not run here (the message says why)."""


_TIMED_OUT = re.compile(r"\btimed out after \d")
_KILLED = re.compile(r"\bkilled by (?:SIG[A-Z0-9]+|signal \d+)")


def _failure_category(kind: CheckKind | None, message: str) -> str | None:
    """A timeout is the kind's ``on_timeout``, a dead process its crash's category, anything else the kind's."""
    if kind is None:
        return None
    head = message.strip().splitlines()[0] if message.strip() else ""
    if _TIMED_OUT.search(head):
        return kind.on_timeout
    if _KILLED.search(head):
        return crash_category(message)
    return kind.category


# Checks the framework itself records for every stage (besides the stage's own CHECKS).
FRAMEWORK_CHECKS: tuple[CheckKind, ...] = (
    CheckKind(
        CONFIG_CHECK,
        "configuration_error",
        "the stage's options and its model are usable (the model imports, the options parse)",
        CONFIG_FIX,
    ),
    CheckKind(
        "stage",
        "configuration_error",
        "the stage ran to its end (an exception escaping it means a broken model, environment or gatekeeper)",
        "read the traceback in the message: a model factory or the environment raised, or (in gatekeeper's own "
        "code) report it",
    ),
)


def declared_kinds(stage: str) -> tuple[tuple[CheckKind, ...], tuple[MetricKind, ...]] | None:
    """The check and metric kinds a registered stage declares (with the framework's); None for another name."""
    from stages import STAGES, load_stage

    if stage not in STAGES:
        return None
    module = load_stage(stage)
    return tuple(module.CHECKS) + FRAMEWORK_CHECKS, tuple(module.METRICS)


@dataclass
class _Handle:
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class Recorder:
    """Collects checks and metrics while a stage runs."""

    def __init__(
        self,
        stage: str,
        stream: Any = None,
        *,
        kinds: tuple[CheckKind, ...] | None = None,
        metric_kinds: tuple[MetricKind, ...] | None = None,
    ) -> None:
        """``kinds``/``metric_kinds``: default, the declarations of the registered stage ``stage``.

        A check or a metric that no declared kind covers is refused (``UndeclaredName``): its
        failure would have no category. Only a recorder for a name that is no registered stage
        (a unit test's) records without declarations.
        """
        self.stage = stage
        if kinds is None and metric_kinds is None:
            declared = declared_kinds(stage)
            kinds, metric_kinds = declared if declared is not None else (None, None)
        self.kinds = kinds
        self.metric_kinds = metric_kinds
        self.checks: list[Check] = []
        self.metrics: dict[str, Metric] = {}
        self.summary: dict[str, Any] = {}
        self._group = ""
        self._names: set[str] = set()
        self._stream = stream

    @property
    def stream(self) -> Any:
        return self._stream or sys.stdout

    def log(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def record(
        self,
        name: str,
        status: str,
        message: str = "",
        *,
        duration_s: float = 0.0,
        group: str | None = None,
        details: Mapping[str, Any] | None = None,
        category: str | None = None,
    ) -> Check:
        """``category``: for a failure whose cause is known better than the kind's (a timeout, a crash)."""
        kind = self._kind(name)
        category = category or _failure_category(kind, message) if status in ("failed", "error") else None
        unique = name
        n = 2
        while unique in self._names:  # JUnit needs each case once
            unique = f"{name}#{n}"
            n += 1
        self._names.add(unique)
        check = Check(
            unique,
            status,  # type: ignore[arg-type]
            message,
            max(duration_s, 0.0),
            group or self._group,
            dict(details or {}),
            category=category,
            fix=kind.fix if kind is not None and category is not None else "",
        )
        self.checks.append(check)
        mark = {"passed": "ok", "failed": "FAIL", "error": "ERROR", "skipped": "skip", "info": "info"}[status]
        first = message.strip().splitlines()[0] if message.strip() else ""
        # a failure's line ends with its category: the job log alone then names the cause (gatekeeper analyze's
        # gatekeeper-failed-* signatures in gatekeeper/analyze/known_issues.yaml)
        said = f" (category: {category})" if category else ""
        self.log(f"  [{mark}] {unique}" + (f": {first}" if first and status != "passed" else "") + said)
        return check

    def _kind(self, name: str) -> CheckKind | None:
        if self.kinds is None:
            return None
        kind = find_kind(name, self.kinds)
        if not isinstance(kind, CheckKind):
            raise UndeclaredName(
                f"{self.stage}: check {name!r} matches no declared check kind: add one to {self.stage}.CHECKS "
                "(pattern, failure category, what it checks, the fix)"
            )
        return kind

    def skip(self, name: str, reason: str, *, group: str | None = None) -> Check:
        return self.record(name, "skipped", reason, group=group)

    @contextlib.contextmanager
    def check(self, name: str, *, group: str | None = None) -> Iterator[_Handle]:
        """Time a block: it passes unless it raises (AssertionError: failed; SkipCheck: skipped; else error)."""
        handle = _Handle()
        start = time.monotonic()
        try:
            yield handle
        except SkipCheck as err:
            self.record(
                name, "skipped", str(err), duration_s=time.monotonic() - start, group=group, details=handle.details
            )
        except AssertionError as err:
            msg = str(err) or "assertion failed"
            self.record(name, "failed", msg, duration_s=time.monotonic() - start, group=group, details=handle.details)
        except Exception as err:
            msg = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=6)}"
            self.record(name, "error", msg, duration_s=time.monotonic() - start, group=group, details=handle.details)
        else:
            self.record(
                name, "passed", handle.message, duration_s=time.monotonic() - start, group=group, details=handle.details
            )

    def outcome(self, name: str, outcome: IsolatedOutcome, *, group: str | None = None) -> Check:
        """Record an isolated call. Its value may be a message string or {"message", "details"}."""
        if outcome.kind == "ok":
            value = outcome.value
            msg = value.get("message", "") if isinstance(value, dict) else (value if isinstance(value, str) else "")
            details = value.get("details") if isinstance(value, dict) else None
            return self.record(name, "passed", msg, duration_s=outcome.duration_s, group=group, details=details)
        if outcome.kind == "raised":
            status = {"AssertionError": "failed", "SkipCheck": "skipped"}.get(outcome.error_type, "error")
            msg = outcome.message
            if status != "error":  # the traceback adds nothing to an assertion's own message
                msg = msg.split("\nTraceback", 1)[0].split(": ", 1)[-1]
            return self.record(name, status, msg, duration_s=outcome.duration_s, group=group)
        # crashed (segfault, abort) or timed out: a failed check, and the stage goes on
        return self.record(name, "failed", outcome.message, duration_s=outcome.duration_s, group=group)

    def metric(
        self,
        name: str,
        value: float | None,
        unit: str,
        better: str = "none",
        *,
        samples: list[float] | list[list[float]] | None = None,
        description: str = "",
    ) -> None:
        category = None
        if self.metric_kinds is not None:
            kind = find_kind(name, self.metric_kinds)
            if kind is None:
                raise UndeclaredName(
                    f"{self.stage}: metric {name!r} matches no declared metric kind: add one to {self.stage}.METRICS "
                    "(pattern, the category of a gate failing on it, what it measures)"
                )
            category = kind.category
        self.metrics[name] = Metric.of(value, unit, better, samples, description, category=category)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def group(self, name: str, header: str | None = None) -> Iterator[None]:
        previous = self._group
        self._group = name
        try:
            with section(f"{self.stage}_{name}", header or f"{self.stage}: {name}", stream=self.stream):
                yield
        finally:
            self._group = previous

    def status(self) -> str:
        statuses = {c.status for c in self.checks}
        if statuses & {"failed", "error"}:
            return "failed"
        if statuses <= {"skipped", "info"}:  # facts alone are not a pass
            return "skipped"
        return "passed"
