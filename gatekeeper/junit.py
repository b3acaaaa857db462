"""Summarise JUnit XML files from any test runner, for ``junit:`` gates.

Streams with ``defusedxml``'s iterparse and drops each test case once counted,
instead of ``junitparser.JUnitXml.fromfile``: a 200,000-case report would
otherwise be held whole in memory as a tree (see benchmarks/README.md).
defusedxml also refuses entity expansion and external entities, so a hostile
report cannot blow up memory or read local files.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from gatekeeper.errors import InputError

__all__ = ["JUnitSummary", "expand", "summarize"]

_MAX_NAMES = 20
_RE_POS = re.compile(r":? line \d+, column \d+$")


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


def _count(path: Path, names: list[str]) -> tuple[int, int, int, int]:
    tests = failures = errors = skipped = 0
    try:
        for _event, elem in iterparse(str(path), events=("end",), forbid_dtd=True):
            tag = elem.tag.rsplit("}", 1)[-1]
            if tag != "testcase":
                if tag in ("testsuite", "testsuites"):
                    elem.clear()
                continue
            tests += 1
            kinds = {child.tag.rsplit("}", 1)[-1] for child in elem}
            if "error" in kinds:
                errors += 1
            elif "failure" in kinds:
                failures += 1
            elif "skipped" in kinds:
                skipped += 1
            if kinds & {"error", "failure"} and len(names) < _MAX_NAMES:
                names.append(f"{elem.get('classname', '')}.{elem.get('name', '')}".strip("."))
            elem.clear()
    except FileNotFoundError:
        raise InputError(path, "", "JUnit file not found", "check the junit: glob in gates.yaml") from None
    except DefusedXmlException as err:
        raise InputError(
            path, "", f"refused unsafe XML ({type(err).__name__})", "JUnit files may not declare DTDs or entities"
        ) from None
    except ParseError as err:
        line, col = err.position
        raise InputError(
            path,
            f"{line}:{col + 1}",
            f"malformed XML: {_RE_POS.sub('', str(err))}",
            "regenerate the report",
        ) from None
    return tests, failures, errors, skipped
