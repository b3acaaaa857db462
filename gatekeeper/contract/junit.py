"""Summarise JUnit XML files from any test runner, for ``junit:`` gates.

The reader streams and keeps only counts and the first failing names; memory stays
flat whatever the size of the file. It does not use junitparser (the project's
usual choice for JUnit): ``JUnitXml.fromfile`` builds the whole tree, which on a
200,000-case report took 0.63 s of CPU and 99 MB beyond its import, against
0.15 s and nothing measurable here (benchmarks/README.md, "Evaluate over a
large JUnit file"). ElementTree's iterparse (also defusedxml's) cost more than
expat alone: it creates an element and a Python event for every one.

Two ways through a file, with the same answers (tests/contract/test_junit.py holds
them to each other):

- **scan** (most files): expat checks the whole document with no element handler,
  so the parse stays in C, while the same bytes are searched for ``<testcase``,
  ``<failure``, ``<error`` and ``<skipped`` tags. Searching raw bytes is exact only
  where every ``<`` starts a tag: so only for ASCII-compatible encodings, and only
  when expat reports no comment, CDATA section or processing instruction (any of
  these, and the file is read again the other way). A failure belongs to the
  nearest ``<testcase`` before it that is still open there.
- **callbacks**: expat with element handlers, one Python call per tag.

Either way DTDs and entity declarations are refused outright (as defusedxml does),
so entity expansion ("billion laughs") and XXE cannot happen; the bytes held at
once are bounded (a chunk, plus the current test case up to ``_MAX_CARRY``, and one
tag up to ``_MAX_TOKEN``). A well-formed document whose root is not ``<testsuites>``
or ``<testsuite>`` is not a JUnit report and is refused: it holds no test case, so a
``failures`` gate would pass on it. The cost stays linear in the file's size (see
``_feed``).
"""

from __future__ import annotations

import bisect
import glob
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NoReturn
from xml.parsers import expat

from gatekeeper.core.budgets import open_regular
from gatekeeper.core.errors import InputError

__all__ = ["JUnitSummary", "expand", "summarize"]

_MAX_NAMES = 20
_CHUNK = 1 << 16  # 64 KiB: as fast as 256 KiB here, 0.65 MB less resident (benchmarks/README.md)
_MAX_CARRY = 8 << 20  # a single test case larger than this is read with callbacks instead
_MAX_TOKEN = 64 << 20  # one tag, comment or processing instruction larger than this is refused
_ROOTS = ("testsuites", "testsuite")
_FLAGS = {"failure": 1, "error": 2, "skipped": 4}

# Byte patterns over a document expat has checked (see the module docstring). The plain names are
# found by a literal count and one alternation (both run at memory speed); names with a namespace
# prefix by a slower pattern, run only where the bytes hold a ':' at all.
_PREFIX = rb"(?:[^\s<>/:=\"']+:)?"
_CASE = re.compile(rb"<" + _PREFIX + rb"testcase[\s/>]")
_PLAIN_CASE = re.compile(rb"<testcase[\s/>]")
_PLAIN_ODD = re.compile(rb"<testcase[^\s/>]")  # <testcases>, <testcase-x>: not a test case
_PLAIN_MARK = re.compile(rb"<(failure|error|skipped)[\s/>]")
_PREFIXED = re.compile(rb"<[^\s<>/:=\"']+:(testcase|failure|error|skipped)[\s/>]")
_BITS = {b"failure": 1, b"error": 2, b"skipped": 4}
_CASE_END = re.compile(rb"</" + _PREFIX + rb"testcase\s*>")
# A start tag: attribute values may hold '>' but never '<'.
_START_TAG = re.compile(rb"<[^\s/>]+(?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*\s*(/?)>")
_DECL_ENCODING = re.compile(rb"^(?:\xef\xbb\xbf)?<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")
_ASCII_COMPATIBLE = {"utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1", "latin-1", "latin1"}


@dataclass(frozen=True)
class JUnitSummary:
    files: tuple[str, ...]
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    failure_names: tuple[str, ...] = ()  # the first few test cases with a failure (and no error), for the reason line
    error_names: tuple[str, ...] = ()  # the first few with an error

    @property
    def failed_names(self) -> tuple[str, ...]:
        """Every failing case named: failures, then errors."""
        return self.failure_names + self.error_names

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
    names: _Names = ([], [])
    done: list[str] = []
    for path in paths:
        t, f, e, s = _count(Path(path), names)
        tests, failures, errors, skipped = tests + t, failures + f, errors + e, skipped + s
        done.append(str(path))
    return JUnitSummary(tuple(done), tests, failures, errors, skipped, tuple(names[0]), tuple(names[1]))


# The first _MAX_NAMES names of the test cases with a failure, and of those with an error (an error wins, as in
# the counts), in the order the cases start.
_Names = tuple[list[str], list[str]]


class _UnsafeXml(Exception):
    """A DTD or an entity declaration; args[0] is where it starts."""


class _NotJUnit(Exception):
    """The document's root element is not a JUnit one (its name in args[0])."""


class _TooBig(Exception):
    """One token (a tag, a comment) beyond _MAX_TOKEN; args[0] is where it starts."""


class _NeedsCallbacks(Exception):
    """The scan cannot be exact for this file: read it with callbacks."""


def _give_up(*_args: object) -> NoReturn:
    raise _NeedsCallbacks


def _count(path: Path, names: _Names, *, scan: bool = True) -> tuple[int, int, int, int]:
    """(tests, failures, errors, skipped) of one file; failing names added to ``names`` (at most _MAX_NAMES each)."""
    try:
        with open_regular(path, what="JUnit file") as fh:
            if scan and _scannable(fh.read(1024)):
                fh.seek(0)
                found: _Names = ([], [])
                try:
                    counts = _scan(fh, found)
                except _NeedsCallbacks:
                    pass
                else:
                    for mine, got in zip(names, found, strict=True):
                        mine.extend(got[: _MAX_NAMES - len(mine)])
                    return counts
            fh.seek(0)
            return _callbacks(fh, names)
    except LookupError as err:  # <?xml encoding="x-unknown"?>: the name is the file's, so only its start is shown
        raise InputError(path, "1:1", f"unknown XML encoding ({str(err)[:80]})", "write the report as UTF-8") from None
    except ValueError as err:  # e.g. a multi-byte encoding expat cannot read
        raise InputError(path, "1:1", f"unreadable XML ({str(err)[:80]})", "write the report as UTF-8") from None
    except _NotJUnit as err:
        raise InputError(
            path,
            "1",
            f"not a JUnit report: the root element is <{err.args[0][:40]}>, not <testsuites> or <testsuite>",
            "point the junit: glob at the test runner's JUnit XML only",
        ) from None
    except _TooBig as err:
        raise InputError(
            path, err.args[0], f"one tag or comment is over {_MAX_TOKEN >> 20} MiB", "regenerate the report"
        ) from None
    except _UnsafeXml as err:
        raise InputError(
            path,
            err.args[0],
            "refused unsafe XML (a DTD or entity declaration)",
            "JUnit files may not declare DTDs or entities",
        ) from None
    except expat.ExpatError as err:
        where = f"{err.lineno}:{err.offset + 1}"
        raise InputError(
            path, where, f"malformed XML: {expat.ErrorString(err.code)}", "regenerate the report"
        ) from None


def _parser() -> expat.XMLParserType:
    parser = expat.ParserCreate()

    def refuse(*_args: object) -> NoReturn:
        raise _UnsafeXml(f"{parser.CurrentLineNumber}:{parser.CurrentColumnNumber + 1}")

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    return parser


def _check_root(tag: str) -> None:
    """The first start tag is the root: a JUnit one, or the document is refused."""
    if tag.rsplit(":", 1)[-1] not in _ROOTS:
        raise _NotJUnit(tag)


def _feed(parser: expat.XMLParserType, fh: IO[bytes]) -> Iterator[bytes]:
    """Give ``fh`` to ``parser``; yields each chunk once expat has it, b"" (the end) last.

    Expat parses a token cut by a chunk's end again from its start when the next chunk comes: a tag of n
    bytes read in fixed chunks costs O(n**2) (a 4 MiB attribute took 5 s with ``ParseFile``'s 2 KiB reads).
    So each read is at least as big as what expat still holds unparsed: the held part doubles each time and
    the cost stays linear. A token beyond _MAX_TOKEN is refused (its bytes are held in memory)."""
    fed = 0
    while True:
        held = fed - max(parser.CurrentByteIndex, 0)  # outside a callback: just past the last parse event
        if held > _MAX_TOKEN:
            raise _TooBig(f"{parser.CurrentLineNumber}:{parser.CurrentColumnNumber + 1}")
        chunk = fh.read(max(_CHUNK, held))
        parser.Parse(chunk, not chunk)  # raises first on anything malformed, unsafe or unscannable
        fed += len(chunk)
        yield chunk
        if not chunk:
            return


def _scannable(head: bytes) -> bool:
    """An encoding in which every '<' byte is a '<' character (no UTF-16/32, no EBCDIC)."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in head:
        return False
    m = _DECL_ENCODING.match(head)
    return m is None or m.group(1).decode("ascii").lower() in _ASCII_COMPATIBLE


def _scan(fh: IO[bytes], names: _Names) -> tuple[int, int, int, int]:
    parser = _parser()
    parser.CommentHandler = _give_up
    parser.StartCdataSectionHandler = _give_up
    parser.ProcessingInstructionHandler = _give_up

    def root(tag: str, _attrs: dict[str, str]) -> None:
        _check_root(tag)
        parser.StartElementHandler = None  # one Python call per document: the rest of the parse stays in C

    parser.StartElementHandler = root
    counts = [0, 0, 0, 0]  # tests, failures, errors, skipped
    carry = b""
    first = True  # buf starts at the file's start
    for chunk in _feed(parser, fh):
        buf = carry + chunk
        if not chunk:
            _tally(buf, len(buf), counts, names, at_file_start=first)
            return counts[0], counts[1], counts[2], counts[3]
        cut = _last_case(buf)  # everything before the last test case's start is complete
        _tally(buf, cut, counts, names, at_file_start=first)
        first = first and cut == 0
        carry = buf[cut:]
        if len(carry) > _MAX_CARRY:
            raise _NeedsCallbacks
    raise AssertionError("_feed ends with b''")  # pragma: no cover


def _last_case(buf: bytes) -> int:
    """Where the last complete ``<testcase`` tag name in ``buf`` starts (0 when none does after the start).

    What follows it, a tag cut short by the chunk's end included, is carried to the next chunk."""
    end = len(buf)
    while True:
        lt = buf.rfind(b"<", 0, end)
        if lt <= 0:
            return 0
        if _CASE.match(buf, lt):
            return lt
        end = lt


def _tally(buf: bytes, end: int, counts: list[int], names: _Names, *, at_file_start: bool) -> None:
    """Count the test cases that start in ``buf[:end]`` and classify those with a failure, error or skip."""
    cases = buf.count(b"<testcase", 0, end)
    if cases and _PLAIN_ODD.search(buf, 0, end):
        cases = len(_PLAIN_CASE.findall(buf, 0, end))
    marks = [(m.start(), _BITS[m.group(1)]) for m in _PLAIN_MARK.finditer(buf, 0, end)]
    if buf.find(b":", 0, end) >= 0:
        for m in _PREFIXED.finditer(buf, 0, end):
            if m.group(1) == b"testcase":
                cases += 1
            else:
                marks.append((m.start(), _BITS[m.group(1)]))
    counts[0] += cases
    flagged: dict[int, int] = {}
    for pos, bit in marks:
        start = _open_case(buf, pos, at_file_start=at_file_start)
        if start is not None:
            flagged[start] = flagged.get(start, 0) | bit
    for start in sorted(flagged):
        kind = flagged[start]
        counts[2 if kind & 2 else 1 if kind & 1 else 3] += 1
        into = names[1 if kind & 2 else 0]
        if kind & 3 and len(into) < _MAX_NAMES:
            into.append(_case_name(buf, start))


def _open_case(buf: bytes, pos: int, *, at_file_start: bool) -> int | None:
    """The start of the innermost test case open at ``pos`` (None: outside every test case).

    Walks back over the tags before ``pos``: a test case that ended before ``pos`` is stepped over."""
    depth = 0  # test cases that end between here and pos
    end = pos
    while True:
        lt = buf.rfind(b"<", 0, end)
        if lt < 0:
            if at_file_start:
                return None
            raise _NeedsCallbacks  # the open test case may lie in an earlier chunk (nested test cases)
        end = lt
        if _CASE_END.match(buf, lt):
            depth += 1
        elif _CASE.match(buf, lt):
            tag = _START_TAG.match(buf, lt)
            if tag is None:  # cannot happen in a document expat accepted; never guess
                raise _NeedsCallbacks
            if tag.group(1):  # <testcase .../> ended where it began
                continue
            if depth == 0:
                return lt
            depth -= 1


def _case_name(buf: bytes, start: int) -> str:
    """``classname.name`` from the start tag at ``start``, entities decoded by expat."""
    tag = _START_TAG.match(buf, start)
    assert tag is not None  # checked by _open_case  # nosec B101
    text = tag.group(0)
    if not tag.group(1):
        text = text[:-1] + b"/>"
    attrs: dict[str, str] = {}

    def grab(_name: str, a: dict[str, str]) -> None:
        attrs.update(a)

    mini = expat.ParserCreate()
    mini.StartElementHandler = grab
    mini.Parse(text, True)
    return f"{attrs.get('classname', '')}.{attrs.get('name', '')}".strip(".")


def _callbacks(fh: IO[bytes], names: _Names) -> tuple[int, int, int, int]:
    """Count test cases with expat callbacks: no tree is built, memory stays flat.

    A failure, error or skip belongs to the innermost open test case (a stack: nested test
    cases are not JUnit, but they are read the same way as the scan reads them). Names come
    in the order the test cases start."""
    counts = [0, 0, 0, 0]  # tests, failures, errors, skipped
    stack: list[list] = []  # [ordinal, attributes, flags] of each open test case
    started = [0]
    rooted: list[str] = []  # the root element, once seen
    # (ordinal, name) of the first _MAX_NAMES test cases by start: with a failure, with an error
    found: tuple[list[tuple[int, str]], list[tuple[int, str]]] = ([], [])

    def start(tag: str, attrs: dict[str, str]) -> None:
        if not rooted:
            _check_root(tag)
            rooted.append(tag)
        if ":" in tag:  # a namespace prefix (rare in JUnit)
            tag = tag.rsplit(":", 1)[1]
        if tag == "testcase":
            stack.append([started[0], attrs, 0])
            started[0] += 1
        elif stack and tag in _FLAGS:
            stack[-1][2] |= _FLAGS[tag]

    def end(tag: str) -> None:
        if tag != "testcase" and not tag.endswith(":testcase"):
            return
        ordinal, attrs, kind = stack.pop()
        counts[0] += 1
        if kind & 2:
            counts[2] += 1
        elif kind & 1:
            counts[1] += 1
        elif kind & 4:
            counts[3] += 1
        into = found[1 if kind & 2 else 0]
        if kind & 3 and (len(into) < _MAX_NAMES or ordinal < into[-1][0]):
            bisect.insort(into, (ordinal, f"{attrs.get('classname', '')}.{attrs.get('name', '')}".strip(".")))
            del into[_MAX_NAMES:]

    parser = _parser()
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    for _chunk in _feed(parser, fh):
        pass
    for mine, got in zip(names, found, strict=True):
        mine.extend([name for _, name in got][: _MAX_NAMES - len(mine)])
    return counts[0], counts[1], counts[2], counts[3]
