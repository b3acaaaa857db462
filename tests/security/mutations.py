"""The one catalogue of hostile mutations that tests/security/test_matrix.py applies to every input.

A mutation class changes one input in one hostile way. Structured classes find the fields they change by
the roles an input declares (``Roles``: which keys hold numbers, free text, the job's context), anywhere in
the document, so they keep working when a format gains fields. File classes replace the file itself.

Each class has one representative payload (the default profile, run by ``make test``) and a hypothesis
strategy of variants (the fuzz profile, ``make fuzz``). Adding a class: add it to CLASSES with its
``apply``, its payload and strategy, then give every (command, input) of the matrix an expected exit code
for it (tests/security/matrix.py) or say why it does not apply.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# what a name or version may not hold (tab and newline too): the text classes leave it out of Roles.names
from gatekeeper.core.escape import CONTROL_CHARS as CONTROL_IN_NAMES

# ------------------------------------------------------------------ payloads

# Terminal escapes: CSI (clear screen, colour), an OSC 8 hyperlink and an OSC title ended by BEL, a bare C1 CSI
# (0x9b), carriage return, backspace, NUL, and bidi overrides/isolates that reorder what a reader sees.
CONTROL = (
    "ctl \x1b[2J\x1b[31mred\x1b[0m \x1b]8;;https://evil.example\x07link\x1b]8;;\x07 \x1b]0;title\x07 "
    "\x9b31m c1 \r\x08\x00 \u202eevil\u202c \u2067iso\u2069 end"
)
CONTROL_CHARS = "\x1b\x07\x9b\r\x08\x00\u202e\u2067"

# Markup for every output format at once: GitLab quick actions and mentions, HTML, a markdown link and image,
# Slack specials, matplotlib mathtext (a lone "$" opens math; "\frac{" without its braces breaks the parser).
MARKUP = (
    "mk <img src=x onerror=alert(1)> <script>alert(1)</script> </details> "
    "[click](https://evil.example) ![i](https://evil.example/i.png) @all @here #1 !2 "
    "<!channel> <!here> <@U123> <https://evil.example|Pipeline> `tick` ``` "
    "ms $\\frac{$ $x^$"
    "\n/approve\n/merge\n/close"
)
HTML_TAG = "<img src=x onerror=alert(1)>"
QUICK_ACTIONS = ("/approve", "/merge", "/close")

# Secret shapes (planted values are unique strings, so a leak is found by a plain search in every output).
SECRET_VALUES = (
    "Pw-db-9f3k2j1h7g",
    "Tk-svc-4n8m2b6v0c",
    "Bearer-hdr-5t7y9u1i3o",
    "Ptk-hdr-2w4e6r8t0y",
    "glpat-Zx9Yw8Vu7Ts6Rq5Po4Nm",
)
SECRET = (
    # first a harmless name holding a secret word: the redactor once let "tokenizer:" take the rest of its line
    "tokenizer: bert-base-uncased "
    f"export DB_PASSWORD={SECRET_VALUES[0]} SERVICE_TOKEN={SECRET_VALUES[1]} "
    f"{{'Authorization': 'Bearer {SECRET_VALUES[2]}', 'PRIVATE-TOKEN': '{SECRET_VALUES[3]}'}} "
    f"token {SECRET_VALUES[4]}"
)

HUGE_INT = "9" * 400  # an integer with 400 digits, as JSON text
# the number role of a tool's raw output: every run of digits in it (an index, a size, a power cap), 2026-12-04
# audit, fourth pass: doctor --from was exit 70 on a capture whose numbers no tool prints
DIGITS = frozenset({"<every run of digits>"})
NON_FINITE = "NaN"  # also Infinity, -Infinity in the fuzz profile
NOT_A_NUMBER = "fast"


# ------------------------------------------------------------------ documents and roles


@dataclass(frozen=True)
class Roles:
    """Which keys of an input's document a structured mutation may change (found anywhere in the tree)."""

    numbers: frozenset[str] = frozenset()  # keys whose values are numbers (or lists of numbers)
    texts: frozenset[str] = frozenset()  # keys whose string values are free text that some output shows
    # key -> a value that contradicts the job, set wherever the key is; a dotted path ("result.signature.project")
    # plants the key at that place even where the valid document has none (a claim a file could add)
    context: dict[str, Any] = field(default_factory=dict)
    # key or dotted path ("jobs.*.last_alert": "*" is every key of a map) -> what a "future-time" case sets there:
    # FUTURE (the class's payload, a time after the reading job's clock) where the input says when something
    # happened, and what else makes the reader look at that time (a breaker "open", an alert job "failing")
    times: dict[str, Any] = field(default_factory=dict)
    # keys whose string values hold one name or version (a stage's environment: torch_version, device_name...):
    # a control character there is refused (``control-in-name``), so the text classes put their payload there
    # without its control characters (markup, secret shapes and escape text stay: shown escaped, never refused)
    names: frozenset[str] = frozenset()


@dataclass
class Doc:
    """A structured input being mutated: the parsed document, or text (logs, tool outputs).

    Values a serializer cannot write (NaN, a 400-digit integer as text, a duplicate key) are marked here and
    put in by the input's own serializer (tests/security/matrix.py ``Input.dump``)."""

    data: Any
    token: str | None = None  # raw text that replaces every MARK in the serialized document
    duplicate: bool = False  # serialize the first key twice, a decoy value first


MARK = "__GK_MUTATED_NUMBER__"
FUTURE = "__GK_FUTURE_TIME__"  # in Roles.times: the "future-time" payload goes here
SQLITE = ("sqlite-row", "sqlite-series", "sqlite-anchor")  # inputs that are rows of a sqlite history store


def _walk(node: Any, keys: frozenset[str] | set[str]) -> Iterator[tuple[Any, Any]]:
    """(container, key) of every matching key, depth first."""
    if isinstance(node, dict):
        for k in list(node):
            if k in keys:
                yield node, k
            yield from _walk(node[k], keys)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, keys)


def _numbers(doc: Doc, roles: Roles, token: str) -> int:
    """Every number under a number key (or the first of a list of numbers) becomes the raw JSON ``token``; in a
    tool's raw output (``DIGITS`` among its number roles), every run of digits becomes the token."""
    if isinstance(doc.data, str):
        doc.data, n = re.subn(r"\d+", lambda _: token, doc.data) if roles.numbers >= DIGITS else (doc.data, 0)
        doc.token = None
        return n
    n = 0
    for parent, key in _walk(doc.data, roles.numbers):
        value = parent[key]
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)):
            parent[key] = MARK
            n += 1
        elif isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in _flat(value)):
            parent[key] = [MARK, *_flat(value)[1:]]
            n += 1
    doc.token = token if n else None
    return n


def _flat(value: list) -> list:
    out: list = []
    for v in value:
        out += _flat(v) if isinstance(v, list) else [v]
    return out


def _texts(doc: Doc, roles: Roles, payload: str) -> int:
    if isinstance(doc.data, str):  # a log or a tool output: the payload on lines of its own, start and end
        doc.data = f"{payload}\n{doc.data}\n{payload}\n"
        return 1
    return _append(doc, roles.texts, payload) + _append(doc, roles.names, re.sub(CONTROL_IN_NAMES, "", payload))


def _append(doc: Doc, keys: frozenset[str], payload: str) -> int:
    n = 0
    for parent, key in _walk(doc.data, keys):
        if isinstance(parent[key], str):
            parent[key] = f"{parent[key]} {payload}"
            n += 1
        elif isinstance(parent[key], list) and parent[key] and all(isinstance(v, str) for v in parent[key]):
            parent[key] = [f"{v} {payload}" for v in parent[key]]
            n += 1
    return n


def _context(doc: Doc, roles: Roles) -> int:
    n = 0
    for parent, key in _walk(doc.data, {k for k in roles.context if "." not in k}):
        parent[key] = roles.context[key]
        n += 1
    for path, value in roles.context.items():  # "a.b.key": planted there (in every row of a list), present or not
        if "." in path:
            *where, key = path.split(".")
            for row in doc.data if isinstance(doc.data, list) else [doc.data]:
                parent = row
                for step in where:
                    parent = parent.get(step) if isinstance(parent, dict) else None
                if isinstance(parent, dict):
                    parent[key] = value
                    n += 1
    return n


def _times(doc: Doc, roles: Roles, payload: str) -> int:
    """Every path of ``roles.times`` set (planted where the valid document has none), FUTURE as ``payload``."""
    n = 0
    for path, value in roles.times.items():
        *where, key = path.split(".")
        parents = doc.data if isinstance(doc.data, list) else [doc.data]
        for step in where:
            if step == "*":
                parents = [v for p in parents if isinstance(p, dict) for v in p.values()]
            else:
                parents = [p.get(step) for p in parents if isinstance(p, dict)]
        for parent in parents:
            if isinstance(parent, dict):
                parent[key] = payload if value == FUTURE else value
                n += 1 if value == FUTURE else 0
    return n


def _duplicate(doc: Doc, roles: Roles) -> int:
    rows = doc.data if isinstance(doc.data, list) else [doc.data]
    if not rows or not all(isinstance(r, dict) and r for r in rows):
        return 0
    doc.duplicate = True
    return len(rows)


# ------------------------------------------------------------------ file classes


# Sizes: the default profile; make fuzz sets bigger ones (read at import, before conftest clears GATEKEEPER_*).
SPARSE_MIB = int(os.environ.get("GATEKEEPER_MATRIX_SPARSE_MIB", "300"))  # beyond the 256 MiB JSON cap
LINE_MIB = int(os.environ.get("GATEKEEPER_MATRIX_LINE_MIB", "24"))
DEPTH = int(os.environ.get("GATEKEEPER_MATRIX_DEPTH", "5000"))  # far beyond any parser's recursion limit


def oversized(path: Path, mib: int = SPARSE_MIB) -> None:
    """A sparse file bigger than any reader's cap: costs no disk, and a reader without a cap would drown."""
    with open(path, "wb") as fh:
        fh.truncate(mib * 2**20)


def newline_free(path: Path, mib: int = LINE_MIB) -> None:
    """``mib`` MiB of text without one newline (a log line that never ends, a JSON document on one line)."""
    chunk = b"A" * 2**20
    with open(path, "wb") as fh:
        for _ in range(mib):
            fh.write(chunk)


def newline_free_xml(path: Path, mib: int = LINE_MIB) -> None:
    """The valid JUnit file with ``mib`` MiB of one test's name: one start tag bigger than any read at once."""
    _xml_splice(path, b"A" * (mib * 2**20))


def to_device(path: Path) -> None:
    """A symlink to a character device that never ends: only regular files may be read."""
    path.symlink_to("/dev/zero")


def fifo(path: Path) -> None:
    """A FIFO nobody writes to: a reader that opens it blocks forever."""
    os.mkfifo(path)


def symlink_loop(path: Path) -> None:
    path.symlink_to(path.name)


def directory(path: Path) -> None:
    path.mkdir()


def truncated(path: Path) -> None:
    """The valid file cut in the middle (a job killed while writing without an atomic rename)."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def wrong_type(path: Path) -> None:
    """A valid document of the wrong type: a list where an object belongs (XML: a document that is not JUnit)."""
    text = {".yaml": "- 1\n- 2\n", ".xml": XML_NOT_JUNIT}.get(path.suffix, "[1, 2, 3]")
    path.write_text(text, encoding="utf-8")


def deep_nesting(path: Path) -> None:
    """Brackets nested DEPTH deep (XML: test cases nested DEPTH deep, a failure in the innermost one)."""
    if path.suffix != ".xml":
        path.write_text("[" * DEPTH + "]" * DEPTH)
        return
    cases = '<testcase classname="deep" name="t">' * DEPTH + '<failure message="deep"/>' + "</testcase>" * DEPTH
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="deep">{cases}</testsuite></testsuites>')


# An alias bomb: 9**9 nodes once expanded (a few hundred bytes on disk).
ALIAS_BOMB = "".join(f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9) if i else 'a'}]\n" for i in range(10)) + "y: *x9\n"
PYTHON_TAG = "!!python/object/apply:os.system ['touch gatekeeper-pwned']\n"
RECURSIVE_ALIAS = "a: &a [*a]\n"


def with_bom(path: Path) -> None:
    """The valid file behind a UTF-8 byte-order mark (what some Windows editors save)."""
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())


# XML (JUnit files, written by whatever test runner the code under test uses).
XML_NOT_JUNIT = '<?xml version="1.0"?><html><body><p>1</p></body></html>'  # well-formed, no test case: not JUnit
# Entity tricks: every one needs a DTD. The bomb expands to 10**9 "lol"s; the external entity would read a local
# file into a test's name; the external DTD would be fetched from a server.
XML_ENTITY_BOMB = (
    '<?xml version="1.0"?>\n<!DOCTYPE testsuites [\n  <!ENTITY l0 "lol">\n'
    + "".join(f'  <!ENTITY l{i} "{f"&l{i - 1};" * 10}">\n' for i in range(1, 10))
    + ']>\n<testsuites><testsuite name="s"><testcase name="&l9;"/></testsuite></testsuites>\n'
)
XML_EXTERNAL_ENTITY = (
    '<?xml version="1.0"?>\n<!DOCTYPE testsuites [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'
    '<testsuites><testsuite name="s"><testcase name="&x;"/></testsuite></testsuites>\n'
)
XML_EXTERNAL_DTD = (
    '<?xml version="1.0"?>\n<!DOCTYPE testsuites SYSTEM "https://evil.example/junit.dtd">\n'
    '<testsuites><testsuite name="s"><testcase name="t"/></testsuite></testsuites>\n'
)


def _declared(data: bytes, encoding: str) -> str:
    """The document's text with its XML declaration naming ``encoding`` (one added where there is none)."""
    text = data.decode("utf-8")
    if text.startswith("<?xml"):
        text = text[text.index("?>") + 2 :].lstrip()
    return f'<?xml version="1.0" encoding="{encoding}"?>\n{text}'


def _xml_utf16(path: Path) -> None:
    """The valid document in UTF-16 (a byte-order mark, every '<' two bytes): read the slow way, same counts."""
    path.write_bytes(_declared(path.read_bytes(), "UTF-16").encode("utf-16"))


def _xml_latin1(path: Path) -> None:
    """The valid document declared ISO-8859-1, with a non-ASCII byte in its first test case's name."""
    text = _declared(path.read_bytes(), "ISO-8859-1").replace('<testcase name="', '<testcase name="caf\xe9 ', 1)
    text = text.replace('<testcase classname="', '<testcase classname="caf\xe9.', 1)
    path.write_bytes(text.encode("latin-1", "xmlcharrefreplace"))


def _xml_splice(path: Path, raw: bytes) -> None:
    """``raw`` spliced into the first test case's first attribute value (a name, as a runner writes it)."""
    data = path.read_bytes()
    at = data.index(b'"', data.index(b"<testcase")) + 1
    path.write_bytes(data[:at] + raw + data[at:])


FILE_WRITERS: dict[str, Callable[[Path], None]] = {
    "oversized": oversized,
    "newline-free": newline_free,
    "symlink-device": to_device,
    "symlink-loop": symlink_loop,
    "fifo": fifo,
    "directory": directory,
    "empty": lambda p: p.write_bytes(b""),
    "not-utf8": lambda p: p.write_bytes(b"\xff\xfe\x00garbage\x80\x81"),
    "deep-nesting": deep_nesting,
    "truncated": truncated,
    "wrong-type": wrong_type,
    "yaml-alias-bomb": lambda p: p.write_text(ALIAS_BOMB, encoding="utf-8"),
    "yaml-python-tag": lambda p: p.write_text(PYTHON_TAG, encoding="utf-8"),
    "yaml-recursive-alias": lambda p: p.write_text(RECURSIVE_ALIAS, encoding="utf-8"),
    "utf8-bom": with_bom,
    "nul-bytes": lambda p: p.write_bytes(b"\x00" * 100),
    "dangling-symlink": lambda p: p.symlink_to("does-not-exist"),
    "xml-entity-bomb": lambda p: p.write_text(XML_ENTITY_BOMB, encoding="utf-8"),
    "xml-external-entity": lambda p: p.write_text(XML_EXTERNAL_ENTITY, encoding="utf-8"),
    "xml-external-dtd": lambda p: p.write_text(XML_EXTERNAL_DTD, encoding="utf-8"),
    "xml-utf16": _xml_utf16,
    "xml-latin1": _xml_latin1,
    "xml-unknown-encoding": lambda p: p.write_bytes(_declared(p.read_bytes(), "x-gatekeeper-unknown").encode()),
    "xml-invalid-bytes": lambda p: _xml_splice(p, b"\xff\xfe\x80"),  # declared UTF-8, not UTF-8
    "xml-illegal-char": lambda p: _xml_splice(p, b"esc &#x1b;[2J bel &#7; nul &#0;"),  # references XML 1.0 forbids
    "xml-raw-control": lambda p: _xml_splice(p, b"esc \x1b[2J bel \x07 bs \x08"),  # raw, as a careless runner writes
}

# File classes that change the valid file they find (the others replace it).
TRANSFORMS = frozenset({"truncated", "utf8-bom", "xml-utf16", "xml-latin1", "xml-unknown-encoding",
                        "xml-invalid-bytes", "xml-illegal-char", "xml-raw-control"})  # fmt: skip


# ------------------------------------------------------------------ the catalogue


@dataclass(frozen=True)
class MutationClass:
    name: str
    kind: str  # "number", "text", "name", "keys", "context", "time", "file"
    what: str  # one line for docs/security.md
    payload: Any = None  # the default profile's one value (text classes, number tokens)
    variants: st.SearchStrategy[Any] | None = None  # the fuzz profile's values
    formats: tuple[str, ...] | None = None  # only inputs of these formats (None: every input)

    def apply_doc(self, doc: Doc, roles: Roles, payload: Any) -> int:
        """Mutate ``doc`` in place; the number of fields changed (0: the class does not apply)."""
        if self.kind == "number":
            return _numbers(doc, roles, payload)
        if self.kind == "text":
            return _texts(doc, roles, payload)
        if self.kind == "name":
            return _append(doc, roles.names, payload)
        if self.kind == "context":
            return _context(doc, roles)
        if self.kind == "time":
            return _times(doc, roles, payload)
        if self.kind == "keys":
            return _duplicate(doc, roles)
        raise AssertionError(self.kind)


_TOKENS = [
    "\x1b[2J", "\x1b]8;;https://e\x07", "\x07", "\x9b", "\x85", "\r", "\x00", "\u202e", "\u2067", "\u2066", "\x7f",
]  # fmt: skip
_MARKUPS = [
    "<img src=x onerror=y>", "</details>", "<script>", "@all", "@here", "<!channel>", "<!here>", "<@U1>",
    "[a](https://evil.example)", "![i](https://e.x/i.png)", "```", "~~~", "\n/approve\n", "\n/merge\n",
    "$\\frac{$", "$x^$", "\\mathdefault{", "$", "| a |", "<https://evil.example|x>", "#1", "!2", "&lt;",
]  # fmt: skip

CLASSES: dict[str, MutationClass] = {
    c.name: c
    for c in (
        MutationClass(
            "huge-number", "number", "an integer with 400 digits where a number belongs", HUGE_INT,
            st.sampled_from(["9" * 400, "-" + "9" * 400, "1e400", "-1e400", "9" * 4301, "1" + "0" * 309]),
        ),
        MutationClass(
            "non-finite", "number", "NaN or an infinity where a number belongs", NON_FINITE,
            st.sampled_from(["NaN", "Infinity", "-Infinity"]),
        ),
        MutationClass(
            "string-number", "number", "a string where a number belongs", json.dumps(NOT_A_NUMBER),
            st.sampled_from([json.dumps(s) for s in ("fast", "", "1e3", "NaN", "0x10", "∞")] + ["true", "null", "[]"]),
        ),
        MutationClass(
            "control-chars", "text", "C0/C1 control characters, ESC/OSC sequences and bidi overrides in free text",
            CONTROL, st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=8).map(lambda t: "ctl " + "".join(t)),
        ),
        MutationClass(
            "control-in-name", "name",
            "the control-chars payload in a name or version (a stage's environment): refused, never shown",
            CONTROL, st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=8).map(lambda t: "ctl " + "".join(t)),
        ),
        MutationClass(
            "markup", "text",
            "HTML, markdown links, GitLab mentions and quick actions, Slack specials, matplotlib mathtext",
            MARKUP, st.lists(st.sampled_from(_MARKUPS), min_size=1, max_size=8).map(lambda t: "mk " + " ".join(t)),
        ),
        MutationClass(
            "secret", "text",
            "secret shapes after a harmless tokenizer: on their line: export PASSWORD=, a _TOKEN= variable, headers "
            "as a dict, a GitLab token",
            SECRET, st.sampled_from([SECRET]),
        ),
        MutationClass("duplicate-key", "keys", "the first key of the document twice (a decoy value first)"),
        MutationClass("context", "context", "channel, project, merge request, commit or pipeline other than the job's"),
        MutationClass(
            "future-time", "time",
            "a time the file says of itself (opened, last alerted, recorded, set) after the reading job's clock",
            "9999-12-31T00:00:00+00:00",
            st.sampled_from(["9999-12-31T00:00:00+00:00", "9999-12-31T23:59:00-01:00", "2999-01-01T00:00:00Z",
                             "zzz"]),
        ),
        *(
            MutationClass(name, "file", what)
            for name, what in (
                ("oversized", f"a sparse file of {SPARSE_MIB} MiB (beyond every reader's cap)"),
                ("newline-free", f"{LINE_MIB} MiB without a newline"),
                ("symlink-device", "a symlink to /dev/zero"),
                ("symlink-loop", "a symlink to itself"),
                ("fifo", "a FIFO nobody writes to"),
                ("directory", "a directory where a file belongs"),
                ("empty", "an empty file"),
                ("not-utf8", "bytes that are not UTF-8"),
                ("deep-nesting", f"brackets nested {DEPTH:,} deep (XML: test cases)"),
                ("utf8-bom", "the valid file behind a UTF-8 byte-order mark"),
                ("nul-bytes", "100 NUL bytes"),
                ("dangling-symlink", "a symlink to nothing"),
            )
        ),
        # A YAML file cut short is often still a valid document (with fewer gates): what catches that is the
        # gates' sha256 in the verdict and --gates-ref, not the parser; so JSON, sqlite and text only.
        MutationClass(
            "truncated", "file", "the valid file cut in the middle", formats=("json", "jsonl", *SQLITE, "text", "xml")
        ),
        MutationClass(
            "wrong-type", "file", "a list where an object belongs (XML: a well-formed document that is not JUnit)",
            formats=("json", "jsonl", "yaml", *SQLITE, "xml"),
        ),
        MutationClass("yaml-alias-bomb", "file", "YAML aliases that expand to 9**9 nodes", formats=("yaml",)),
        MutationClass("yaml-python-tag", "file", "a !!python/object tag that would run a command", formats=("yaml",)),
        MutationClass("yaml-recursive-alias", "file", "an alias inside its own anchor", formats=("yaml",)),
        *(
            MutationClass(name, "file", what, formats=("xml",))
            for name, what in (
                ("xml-entity-bomb", "nested entities that expand to 10**9 strings (billion laughs)"),
                ("xml-external-entity", "an entity that would read /etc/passwd into a test's name (XXE)"),
                ("xml-external-dtd", "a DTD to fetch from a server"),
                ("xml-utf16", "the valid document in UTF-16"),
                ("xml-latin1", "the valid document declared ISO-8859-1, a non-ASCII name"),
                ("xml-unknown-encoding", "an encoding no codec knows"),
                ("xml-invalid-bytes", "bytes that are not UTF-8 in a test's name, the document declared UTF-8"),
                ("xml-illegal-char", "character references XML 1.0 forbids (ESC, BEL, NUL) in a test's name"),
                ("xml-raw-control", "raw ESC, BEL and backspace in a test's name"),
            )
        ),
    )
}  # fmt: skip
