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
    CheckKind,
    MetricKind,
)
from gatekeeper.contract.stage_report import Environment, StageReport, utc_now, write_stage
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode
from stages._recorder import FRAMEWORK_CHECKS, Recorder, SkipCheck
from stages.progress import LogLines, TerminalAwareText

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
