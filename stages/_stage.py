"""The stage framework: options, the check recorder, the stage log, and ``stage_main``.

A stage module defines ``NAME``, ``DESCRIPTION``, a frozen ``Options``
dataclass, ``add_arguments(parser)`` (one argument per Options field) and
``run(ctx)``. ``stage_main(module, argv)`` does the rest: common options,
device detection, the log, timing, and writing the artifacts.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import select
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from gatekeeper.contract.failures import (
    CONFIG_CHECK,
    CONFIG_FIX,
    CheckKind,
    MetricKind,
    UndeclaredName,
    crash_category,
    find_kind,
)
from gatekeeper.contract.stage_report import Check, Environment, Metric, StageReport, utc_now, write_stage
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode
from stages.isolate import IsolatedOutcome
from stages.progress import LogLines, TerminalAwareText, section

__all__ = [
    "FRAMEWORK_CHECKS",
    "CommonOptions",
    "Recorder",
    "SkipCheck",
    "StageContext",
    "StageModule",
    "add_common_arguments",
    "stage_main",
]


class SkipCheck(Exception):
    """Raised inside a check: it could not run here (the message says why)."""


class StageModule(Protocol):
    NAME: str
    DESCRIPTION: str
    Options: type
    CHECKS: tuple[CheckKind, ...]  # every check the stage records, with its failure category
    METRICS: tuple[MetricKind, ...]  # every metric it writes, with the category of a gate failing on it

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, ctx: StageContext) -> None: ...


@dataclass(frozen=True)
class CommonOptions:
    device: str = "auto"
    out: Path = Path("artifacts")
    channel: str | None = None
    model: str | None = None
    batch_size: int = 8
    input_shape: str | None = None
    seed: int = 0
    check_timeout: float = 300.0


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("common stage options")
    g.add_argument(
        "--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto: the GPU when torch sees one"
    )
    g.add_argument("--out", type=Path, default=Path("artifacts"), help="artifacts directory (default: artifacts)")
    g.add_argument("--channel", choices=["stable", "nightly"], help="default: $GATEKEEPER_CHANNEL, else from torch")
    g.add_argument("--model", help="module:factory returning an nn.Module (default: the built-in demo model)")
    g.add_argument("--batch-size", type=int, default=8)
    g.add_argument("--input-shape", help="per-sample input shape, e.g. 3,224,224 (default: the model's example_input)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--check-timeout", type=float, default=300.0, help="seconds before an isolated check is killed")


# How isolate.py and core/proc.py word a process that ran past its timeout or died by a signal.
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
        self.log(f"  [{mark}] {unique}" + (f": {first}" if first and status != "passed" else ""))
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


@dataclass
class StageContext:
    name: str
    common: CommonOptions
    options: Any  # the stage module's frozen Options
    device: Any  # stages.device.DeviceInfo
    environment: Environment
    rec: Recorder
    config: dict[str, Any] = field(default_factory=dict)
    _model: Any = None

    @property
    def out_dir(self) -> Path:
        return self.common.out

    def log(self, text: str) -> None:
        self.rec.log(text)

    def model(self) -> Any:
        """The model under test (``stages.models.LoadedModel``), loaded once."""
        if self._model is None:
            from stages.models import load_model

            self._model = load_model(self.common.model, seed=self.common.seed)
        return self._model


@contextlib.contextmanager
def tee_output(log_path: Path) -> Iterator[None]:
    """Copy everything written to fd 1 and 2 (children included) to ``log_path`` as well."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    # On a terminal the stage still shows its live progress line (stdout becomes a pipe below).
    on_terminal = os.isatty(saved_out)
    columns = os.get_terminal_size(saved_out).columns if on_terminal else None
    read_fd, write_fd = os.pipe()
    log = open(log_path, "wb")  # noqa: SIM115 - closed below after the copier thread ends
    # In a terminal the log keeps a rewritten line's final text; elsewhere it is byte for byte
    # what was written (GitLab's section markers use \r too).
    log_lines = LogLines() if on_terminal else None

    stop = threading.Event()

    def copy() -> None:
        # Not "read until EOF": helper processes (multiprocessing's resource
        # tracker) inherit the pipe and may hold it open after the stage ends.
        while True:
            ready, _, _ = select.select([read_fd], [], [], 0.1)
            if not ready:
                if stop.is_set():
                    break
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            os.write(saved_out, chunk)
            log.write(log_lines.feed(chunk) if log_lines else chunk)
        if log_lines:
            log.write(log_lines.flush())
        log.flush()

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    old_stdout, old_stderr = sys.stdout, sys.stderr
    sys.stdout = TerminalAwareText(
        os.fdopen(os.dup(1), "wb", buffering=0), tty=on_terminal, columns=columns, encoding="utf-8", line_buffering=True
    )
    sys.stderr = sys.stdout
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout.close()
        sys.stdout, sys.stderr = old_stdout, old_stderr
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        stop.set()
        thread.join(timeout=30)
        os.close(read_fd)
        os.close(saved_out)
        os.close(saved_err)
        log.close()


def _options_from(cls: type, args: argparse.Namespace) -> Any:
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def build_parser(module: ModuleType) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"gatekeeper stage {module.NAME}", description=module.DESCRIPTION)
    add_common_arguments(parser)
    module.add_arguments(parser)
    return parser


def stage_main(module: ModuleType, argv: list[str] | None = None) -> int:
    """Parse options, run the stage, write its artifacts. Exit 0 passed or skipped, 1 failed, 2 bad input."""
    args = build_parser(module).parse_args(argv)
    try:
        common = _options_from(CommonOptions, args)
        options = _options_from(module.Options, args)
        return _run_stage(module, common, options)
    except InputError as err:
        print(f"gatekeeper: {err.line()}", file=sys.stderr)
        return ExitCode.INPUT_ERROR


def _run_stage(module: ModuleType, common: CommonOptions, options: Any) -> int:
    out = Path(common.out)
    out.mkdir(parents=True, exist_ok=True)
    started_at, start = utc_now(), time.monotonic()
    log_path = out / f"{module.NAME}.log"
    try:
        return _run_stage_logged(module, common, options, out, log_path, started_at, start)
    except InputError as err:
        # A configuration error (a model that does not import, an option the stage refuses): the stage
        # did no work and writes no artifact (exit 2; the CLI prints the line). Its log keeps the line
        # too, so the failure job's diagnosis names it (a log without its <stage>.json: gatekeeper.analyze).
        with log_path.open("a", encoding="utf-8") as log:
            log.write(f"gatekeeper: {err.line()}\n")
        raise


def _run_stage_logged(  # noqa: PLR0917 - the one caller passes what it prepared
    module: ModuleType, common: CommonOptions, options: Any, out: Path, log_path: Path, started_at: str, start: float
) -> int:
    from stages import device as devmod

    with tee_output(log_path):
        info = devmod.detect(common.device)
        env = devmod.environment(info, common.channel)
        rec = Recorder(module.NAME)
        rec.log(f"gatekeeper stage {module.NAME}: device {info.torch_device} ({info.name or info.no_gpu_reason()})")
        config = {
            "model": common.model or "stages.models:demo_model",
            "batch_size": common.batch_size,
            "input_shape": common.input_shape,
            "seed": common.seed,
            **{k: _jsonable(v) for k, v in dataclasses.asdict(options).items()},
        }
        ctx = StageContext(module.NAME, common, options, info, env, rec, config)
        status = None
        try:
            module.run(ctx)
        except InputError:
            raise
        except Exception as err:
            rec.record("stage", "error", f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=10)}")
            status = "error"
        report, path = _write_report(
            module.NAME,
            status or rec.status(),
            started_at=started_at,
            start=start,
            env=env,
            rec=rec,
            config=ctx.config,
            out=out,
        )
        c = report.counts()
        rec.log(
            f"{module.NAME}: {report.status} ({c['passed']} passed, {c['failed']} failed, {c['error']} errors, "
            f"{c['skipped']} skipped, {c['info']} info) in {report.duration_s:.1f} s -> {path}"
        )
    return ExitCode.BLOCKED if report.status in ("failed", "error") else ExitCode.PASS


def _write_report(
    name: str,
    status: str,
    *,
    started_at: str,
    start: float,
    env: Environment,
    rec: Recorder,
    config: Mapping[str, Any],
    out: Path,
) -> tuple[StageReport, Path]:
    report = StageReport(
        stage=name,
        status=status,  # type: ignore[arg-type]
        started_at=started_at,
        duration_s=time.monotonic() - start,
        environment=env,
        metrics=rec.metrics,
        checks=tuple(rec.checks),
        config=config,
        summary=rec.summary,
    )
    return report, write_stage(report, out)


def _jsonable(v: Any) -> Any:
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, tuple):
        return list(v)
    return v
