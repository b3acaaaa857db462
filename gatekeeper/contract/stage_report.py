"""The artifact contract: StageReport, and reading/writing <stage>.json and <stage>.junit.xml.

Stages write through ``write_stage``; the gatekeeper reads through
``read_stage``/``read_artifacts``. Nothing else touches these files.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from gatekeeper.contract import schemas
from gatekeeper.contract.stage_names import STAGE_NAMES
from gatekeeper.core import files, numbers
from gatekeeper.core.errors import InputError
from gatekeeper.core.schema import control_problem

__all__ = [
    "STAGE_SCHEMA",
    "Check",
    "Environment",
    "Metric",
    "StageReport",
    "bad_numbers",
    "environment_problem",
    "junit_bytes",
    "parse_stage",
    "read_artifacts",
    "read_stage",
    "utc_now",
    "write_junit",
    "write_stage",
]

STAGE_SCHEMA = "gatekeeper.stage/v1"
# info: a fact worth showing (unknown memory, a set override), neither a pass nor a failure
CheckStatus = Literal["passed", "failed", "error", "skipped", "info"]
Better = Literal["lower", "higher", "none"]


@dataclass(frozen=True)
class Check:
    name: str
    status: CheckStatus
    message: str = ""
    duration_s: float = 0.0
    group: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    category: str | None = None  # of a failed or errored check: its kind's (contract/failures.py)
    fix: str = ""  # of a failed or errored check: what to try first, from its kind

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "duration_s": round(self.duration_s, 6),
        }
        if self.group:
            out["group"] = self.group
        if self.details:
            out["details"] = dict(self.details)
        if self.category:
            out["category"] = self.category
        if self.fix:
            out["fix"] = self.fix
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Check:
        return cls(
            d["name"],
            d["status"],
            d["message"],
            d["duration_s"],
            d.get("group", ""),
            d.get("details", {}),
            d.get("category"),
            d.get("fix", ""),
        )


@dataclass(frozen=True)
class Metric:
    value: float | None
    unit: str
    better: Better = "none"
    samples: tuple[tuple[float, ...], ...] | None = None  # one tuple per process
    description: str = ""
    category: str | None = None  # of a gate failing on it: its kind's (contract/failures.py)

    @classmethod
    def of(
        cls,
        value: float | None,
        unit: str,
        better: Better = "none",
        samples: list[float] | list[list[float]] | None = None,
        description: str = "",
        *,
        category: str | None = None,
    ) -> Metric:
        grouped = None
        if samples is not None:
            groups = samples if samples and isinstance(samples[0], list | tuple) else [samples]
            # The first element tells the shape: mypy cannot narrow a union of list types by an element.
            grouped = tuple(tuple(float(x) for x in g) for g in cast("list[list[float]]", groups))
        if value is not None and not math.isfinite(value):
            value = None
        return cls(None if value is None else float(value), unit, better, grouped, description, category)

    @property
    def flat_samples(self) -> list[float]:
        return [x for g in self.samples or () for x in g]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "unit": self.unit, "better": self.better}
        if self.samples is not None:
            out["samples"] = [list(g) for g in self.samples] if len(self.samples) != 1 else list(self.samples[0])
        if self.description:
            out["description"] = self.description
        if self.category:
            out["category"] = self.category
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Metric:
        return cls.of(
            d["value"], d["unit"], d["better"], d.get("samples"), d.get("description", ""), category=d.get("category")
        )


@dataclass(frozen=True)
class Environment:
    torch_version: str | None
    python: str
    host: str
    channel: Literal["stable", "nightly"] = "stable"
    device_kind: Literal["cpu", "rocm", "cuda"] = "cpu"
    torch_git_hash: str | None = None
    hip_version: str | None = None
    cuda_version: str | None = None
    rocm_version: str | None = None
    device_name: str | None = None
    device_count: int = 0
    gfx_arch: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    extra: Mapping[str, str | float | bool | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Environment:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    @property
    def arch(self) -> str | None:
        """The device architecture a baseline must match (gfx arch, compute capability, or cpu)."""
        if self.device_kind == "rocm":
            return (self.gfx_arch or "").split(":")[0] or None
        if self.device_kind == "cuda":
            return f"sm_{(self.compute_capability or '').replace('.', '')}" if self.compute_capability else None
        return "cpu"


def environment_problem(env: object) -> str | None:
    """``"environment.KEY: why"`` for the first key or text value of a stored environment (``extra``'s too)
    with a control character, or None: the stage schema's rule (``$defs.no_control``) for a reader of a
    store's environment column, which reads no report through the schema (``history changes``)."""
    if not isinstance(env, Mapping):
        return None
    texts = [(str(key), key, True) for key in env] + [(str(key), value, False) for key, value in env.items()]
    extra = env.get("extra")
    if isinstance(extra, Mapping):
        texts += [(f"extra.{key}", key, True) for key in extra] + [(f"extra.{k}", v, False) for k, v in extra.items()]
    for place, text, is_key in texts:
        problem = control_problem(text, key=is_key)
        if problem:
            return f"environment.{place}: {problem}"
    return None


@dataclass(frozen=True)
class StageReport:
    stage: str
    status: CheckStatus
    started_at: str
    duration_s: float
    environment: Environment
    metrics: Mapping[str, Metric] = field(default_factory=dict)
    checks: tuple[Check, ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    summary: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": STAGE_SCHEMA,
            "stage": self.stage,
            "status": self.status,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 6),
            "environment": self.environment.to_dict(),
            "config": dict(self.config),
            "metrics": {k: m.to_dict() for k, m in self.metrics.items()},
            "checks": [c.to_dict() for c in self.checks],
        }
        if self.summary:
            out["summary"] = dict(self.summary)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StageReport:
        return cls(
            stage=d["stage"],
            status=d["status"],
            started_at=d["started_at"],
            duration_s=d["duration_s"],
            environment=Environment.from_dict(d["environment"]),
            metrics={k: Metric.from_dict(v) for k, v in d["metrics"].items()},
            checks=tuple(Check.from_dict(c) for c in d["checks"]),
            config=d.get("config", {}),
            summary=d.get("summary", {}),
        )

    def counts(self) -> dict[str, int]:
        out = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "info": 0}
        for c in self.checks:
            out[c.status] += 1
        return out


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def write_stage(report: StageReport, out_dir: str | Path) -> Path:
    """Validate and write <stage>.json and <stage>.junit.xml atomically; return the JSON path."""
    doc = report.to_dict()
    path = Path(out_dir) / f"{report.stage}.json"
    schemas.validate(STAGE_SCHEMA, doc, path=str(path))
    write_junit(report, Path(out_dir) / f"{report.stage}.junit.xml")
    return files.write_json(path, doc)


def write_junit(report: StageReport, path: str | Path) -> Path:
    from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

    from gatekeeper.core.escape import xml_text as x  # check names and messages come from the code under test

    suite = TestSuite(x(report.stage))
    suite.timestamp = x(report.started_at)
    suite.hostname = x(report.environment.host)
    for check in report.checks:
        group = f"{report.stage}.{check.group}" if check.group else report.stage
        case = TestCase(x(check.name), classname=x(group))
        case.time = round(check.duration_s, 6)
        if check.status == "failed":
            case.result = [Failure(x(_first_line(check.message)), "failure")]
            case.system_out = x(check.message)
        elif check.status == "error":
            case.result = [Error(x(_first_line(check.message)), "error")]
            case.system_out = x(check.message)
        elif check.status == "skipped":
            case.result = [Skipped(x(check.message))]
        elif check.status == "info":
            case.system_out = x(f"info (a fact, not a pass): {check.message}")
        elif check.message:
            case.system_out = x(check.message)
        suite.add_testcase(case)
    suite.update_statistics()
    xml = JUnitXml()
    xml.add_testsuite(suite)
    return files.atomic_write(path, junit_bytes(xml))


def junit_bytes(xml: Any) -> bytes:
    """A junitparser document as UTF-8 bytes with an XML declaration."""
    from xml.etree import ElementTree as ET  # serialises our own tree; never parses input  # nosec B405

    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(xml._elem, encoding="utf-8")


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:500]


def read_stage(path: str | Path) -> StageReport:
    return parse_stage(files.read_json(path, what="stage artifact"), path)


def parse_stage(doc: Any, path: str | Path | None, *, what: str = "a stage artifact") -> StageReport:
    """The one strict reader of a stage result already parsed by ``files.read_json``/``parse_json`` (bounded
    numbers): an artifact's, or a record a history store kept. Schema-valid, finite positive timings;
    InputError naming ``path`` and the field otherwise (never a KeyError)."""
    if not isinstance(doc, dict):
        raise InputError(path, "", f"{what} must be a JSON object", "rerun the stage that wrote it")
    numbers.check_tree(doc, path)  # already done by files.read_json; a store may hand over a parsed document
    schema = doc.get("schema")
    if isinstance(schema, str) and schema.startswith("gatekeeper.stage/") and schema != STAGE_SCHEMA:
        raise InputError(
            path,
            "schema",
            f"written by a newer gatekeeper ({schema}); this one reads {STAGE_SCHEMA}",
            "upgrade gatekeeper",
        )
    schemas.validate(STAGE_SCHEMA, doc, path=str(path) if path is not None else "<input>")
    problem = bad_numbers(doc)
    if problem:
        raise InputError(path, problem[0], problem[1], "rerun the stage that wrote it; a timing is finite and > 0")
    return StageReport.from_dict(doc)


TIMING_UNITS = ("ns", "us", "ms", "s")


def _is_timing(unit: str) -> bool:
    return unit in TIMING_UNITS or unit.endswith("/s")


def bad_numbers(doc: Mapping[str, Any]) -> tuple[str, str] | None:
    """(place, problem) for the first non-finite metric value or sample, or non-positive timing sample; else None.

    JSON readers accept NaN and Infinity; the judge cannot, and a NaN recorded
    into a baseline store would break every later comparison.
    """
    for name, m in (doc.get("metrics") or {}).items():
        value = m.get("value")
        if isinstance(value, float) and not math.isfinite(value):
            return f"metrics.{name}.value", f"metric {name} is {value} (not a finite number)"
        raw = m.get("samples") or []
        groups = raw if raw and isinstance(raw[0], list) else [raw]
        for g, group in enumerate(groups):
            for i, x in enumerate(group):
                where = f"metrics.{name}.samples[{g}][{i}]" if len(groups) > 1 else f"metrics.{name}.samples[{i}]"
                if not math.isfinite(x):
                    return where, f"metric {name} has a sample {x} (not a finite number)"
                if x <= 0 and _is_timing(str(m.get("unit", ""))):
                    return where, f"metric {name} has a timing sample {x} {m.get('unit')} (a timing is > 0)"
    return None


def read_artifacts(directory: str | Path) -> dict[str, StageReport]:
    """Every <stage>.json in ``directory`` that claims the stage schema, by stage name."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(directory, "", "artifacts directory not found", "pass the --out directory of the stages")
    reports: dict[str, StageReport] = {}
    origin: dict[str, Path] = {}
    for path in sorted(directory.glob("*.json")):
        # A file named after a stage is that stage's artifact, whatever it holds: an empty,
        # binary or truncated one is corrupt (exit 2), never "the stage wrote nothing".
        if path.stem not in STAGE_NAMES and (path.name.endswith(".junit.json") or not _claims_stage_schema(path)):
            continue
        report = read_stage(path)
        if path.stem in STAGE_NAMES and report.stage != path.stem:
            raise InputError(path, "stage", f"{path.name} claims stage {report.stage!r}", "rerun the stage")
        if report.stage in origin:
            raise InputError(
                path,
                "stage",
                f"a second artifact for stage {report.stage!r} (the first is {origin[report.stage]})",
                "keep one artifact per stage; remove the stray copy",
            )
        reports[report.stage] = report
        origin[report.stage] = path
    return reports


def _claims_stage_schema(path: Path) -> bool:
    # Cheap sniff so verdict.json and other files beside the artifacts are not parsed as stages.
    # Only regular files: a FIFO named *.json would block here forever (InputError names it).
    from gatekeeper.core.budgets import open_regular

    with open_regular(path, what="artifact") as fh:
        head = fh.read(4096)
    declared = re.search(rb'"schema"\s*:\s*"gatekeeper\.([a-z_]+)/', head)
    if declared is not None:  # analysis.json names stages and checks too, and says what it is
        return declared.group(1) == b"stage"
    return b'"gatekeeper.stage/' in head or (path.stem.isidentifier() and b'"stage"' in head and b'"checks"' in head)
