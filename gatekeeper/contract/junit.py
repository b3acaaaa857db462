"""Summarise JUnit XML files from any test runner, for ``junit:`` gates.

Streams the file through expat callbacks instead of
``junitparser.JUnitXml.fromfile`` (or even an iterparse tree): a 200,000-case
report would otherwise be held in memory as elements (measured in
benchmarks/README.md). DTDs and entities are refused outright, so a hostile
report cannot blow up memory or read local files.
"""

from __future__ import annotations

import glob
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from xml.parsers import expat

from gatekeeper.core.budgets import open_regular
from gatekeeper.core.errors import InputError

__all__ = ["JUnitSummary", "expand", "summarize"]

_MAX_NAMES = 20


@dataclass(frozen=True)
class JUnitSummary:
    files: tuple[str, ...]
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    failed_names: tuple[str, ...] = ()  # the first few, for the reason line

    @property
    def passed(self) -> int:
        return self.tests - self.failures - self.errors - self.skipped

    @property
    def pass_rate(self) -> float | None:
        ran = self.tests - self.skipped
        return self.passed / ran if ran > 0 else None

    def metric(self, name: str) -> float | None:
        if name == "pass_rate":
            return self.pass_rate
        return float(getattr(self, name))


def expand(pattern: str) -> list[str]:
    return sorted(glob.glob(pattern, recursive=True))


def summarize(paths: Iterable[str | Path]) -> JUnitSummary:
    tests = failures = errors = skipped = 0
    names: list[str] = []
    done: list[str] = []
    for path in paths:
        t, f, e, s = _count(Path(path), names)
        tests, failures, errors, skipped = tests + t, failures + f, errors + e, skipped + s
        done.append(str(path))
    return JUnitSummary(tuple(done), tests, failures, errors, skipped, tuple(names))


class _UnsafeXml(Exception):
    pass


def _refuse(*_args: object) -> NoReturn:
    raise _UnsafeXml


def _count(path: Path, names: list[str]) -> tuple[int, int, int, int]:
    """Count test cases with expat callbacks: no tree is built, memory stays flat.

    Any DTD, entity declaration or external reference is refused (as defusedxml
    does), so entity expansion ("billion laughs") and XXE cannot happen.
    """
    # Hot path: about 400,000 callbacks for a 200,000-case file, so plain lists and
    # bit flags (failure 1, error 2, skipped 4) instead of sets and f-strings.
    counts = [0, 0, 0, 0]  # tests, failures, errors, skipped
    case: list = [None, 0]  # attributes of the open test case, its result flags
    flags = {"failure": 1, "error": 2, "skipped": 4}

    def start(tag: str, attrs: dict[str, str]) -> None:
        if ":" in tag:  # a namespace prefix (rare in JUnit)
            tag = tag.rsplit(":", 1)[1]
        if tag == "testcase":
            case[0], case[1] = attrs, 0
        elif case[0] is not None and tag in flags:
            case[1] |= flags[tag]

    def end(tag: str) -> None:
        if tag != "testcase" and not tag.endswith(":testcase"):
            return
        counts[0] += 1
        kind = case[1]
        if kind & 2:
            counts[2] += 1
        elif kind & 1:
            counts[1] += 1
        elif kind & 4:
            counts[3] += 1
        if kind & 3 and len(names) < _MAX_NAMES:
            attrs = case[0] or {}
            names.append(f"{attrs.get('classname', '')}.{attrs.get('name', '')}".strip("."))
        case[0] = None

    parser = expat.ParserCreate()
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.StartDoctypeDeclHandler = _refuse
    parser.EntityDeclHandler = _refuse
    parser.UnparsedEntityDeclHandler = _refuse
    parser.ExternalEntityRefHandler = _refuse
    try:
        with open_regular(path, what="JUnit file") as fh:
            parser.ParseFile(fh)
    except LookupError as err:  # <?xml encoding="x-unknown"?>
        raise InputError(path, "1:1", f"unknown XML encoding ({err})", "write the report as UTF-8") from None
    except ValueError as err:  # e.g. a multi-byte encoding expat cannot read
        raise InputError(path, "1:1", f"unreadable XML ({err})", "write the report as UTF-8") from None
    except _UnsafeXml:
        raise InputError(
            path, "", "refused unsafe XML (a DTD or entity declaration)", "JUnit files may not declare DTDs or entities"
        ) from None
    except expat.ExpatError as err:
        where = f"{err.lineno}:{err.offset + 1}"
        raise InputError(
            path, where, f"malformed XML: {expat.ErrorString(err.code)}", "regenerate the report"
        ) from None
    return counts[0], counts[1], counts[2], counts[3]
