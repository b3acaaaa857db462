"""Failure signatures as data: load, validate and compile known-issues YAML.

The built-in knowledge base is ``known_issues.yaml`` in this package; a
repository adds or overrides entries with its own file. Both go through the
``gatekeeper.known_issues/v1`` schema, so a typo is one line with line:col.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from gatekeeper.contract import schemas
from gatekeeper.contract.failures import CATEGORIES
from gatekeeper.core import files
from gatekeeper.core.errors import InputError

__all__ = [
    "CATEGORIES",
    "KNOWN_ISSUES_SCHEMA",
    "Rule",
    "RuleSet",
    "all_required_literals",
    "builtin_path",
    "load_rules",
    "required_literals",
]

KNOWN_ISSUES_SCHEMA = "gatekeeper.known_issues/v1"

DEFAULT_CONFIDENCE = 0.8
_MIN_LITERAL = 3  # shorter literals ("nan" is the floor) would hit on most lines of a log


# The ids of the signatures of gatekeeper's own output lines (known_issues.yaml: "gatekeeper-failed-...").
OWN_OUTPUT_PREFIX = "gatekeeper-"


@dataclass(frozen=True)
class Rule:
    id: str
    category: str
    priority: int
    patterns: tuple[re.Pattern[str], ...]
    explanation: str
    remediation: tuple[str, ...]
    links: tuple[str, ...] = ()
    confidence: float = DEFAULT_CONFIDENCE
    preceded_by: re.Pattern[str] | None = None
    within: int = 0
    waiver: str | None = None
    warning: bool = False  # noise-prone: decides only when no other signature matched after it
    # its lines are its own: no other signature reads a line it matched (a tool's report of a failure it handled
    # and carried on from, e.g. gatekeeper's notify quoting the connection error of a message it spooled)
    owns_line: bool = False
    source: str = "builtin"
    waiver_at: str = ""  # line:col of the waiver in its file, for errors

    @property
    def reads_own_output(self) -> bool:
        """A signature of gatekeeper's own job-log lines (its id starts with ``gatekeeper-``): what gatekeeper
        printed, never what a checked program wrote, so it is not read in the artifacts' messages."""
        return self.id.startswith(OWN_OUTPUT_PREFIX)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "category": self.category,
            "priority": self.priority,
            "source": self.source,
            "waiver": self.waiver,
        }


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]

    def by_id(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)

    def merged(self, other: RuleSet) -> RuleSet:
        """Rules of ``other`` replace rules with the same id and add the rest."""
        theirs = {r.id for r in other.rules}
        return RuleSet(tuple(r for r in self.rules if r.id not in theirs) + other.rules)


def builtin_path() -> Path:
    return Path(str(resources.files(__package__).joinpath("known_issues.yaml")))


def load_rules(path: str | Path | None = None) -> RuleSet:
    """The built-in rules, plus (replacing by id) the rules in ``path`` when given."""
    builtin = _load_file(builtin_path(), source="builtin")
    if path is None:
        return builtin
    return builtin.merged(_load_file(Path(path), source=str(path)))


def _load_file(path: Path, *, source: str) -> RuleSet:
    doc = files.read_yaml(path, what="known-issues file")
    if doc.data is None:
        raise InputError(path, "1:1", "the file is empty", "add an `issues:` list")
    schemas.validate(KNOWN_ISSUES_SCHEMA, doc.data, path=str(path), position=doc.position)
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, entry in enumerate(doc.data["issues"]):
        if entry["id"] in seen:
            raise InputError(path, doc.position(["issues", i, "id"]), f"duplicate id {entry['id']!r}", "ids are unique")
        seen.add(entry["id"])
        rules.append(_rule(entry, source, lambda key_path, i=i: doc.position(["issues", i, *key_path]), path))
    return RuleSet(tuple(rules))


def _rule(entry: Mapping[str, Any], source: str, position: Any, path: Path) -> Rule:
    def compiled(pattern: str, key_path: Sequence[str | int]) -> re.Pattern[str]:
        try:
            return re.compile(pattern)
        except re.error as err:
            raise InputError(
                path, position(key_path), f"invalid regular expression {pattern!r}: {err.msg}", "fix the pattern"
            ) from None

    preceded = entry.get("preceded_by")
    return Rule(
        id=entry["id"],
        category=entry["category"],
        priority=entry["priority"],
        patterns=tuple(compiled(p, ["patterns", j]) for j, p in enumerate(entry["patterns"])),
        explanation=entry["explanation"],
        remediation=tuple(entry["remediation"]),
        links=tuple(entry.get("links", ())),
        confidence=float(entry.get("confidence", DEFAULT_CONFIDENCE)),
        preceded_by=compiled(preceded["pattern"], ["preceded_by", "pattern"]) if preceded else None,
        within=preceded["within"] if preceded else 0,
        waiver=entry.get("waiver"),
        warning=bool(entry.get("warning", False)),
        owns_line=bool(entry.get("owns_line", False)),
        source=source,
        waiver_at=position(["waiver"]) if entry.get("waiver") else "",
    )


# --- literal prefilter -------------------------------------------------------
# Scanning hundreds of MB with dozens of regexes per line is too slow in Python.
# Every match of a pattern must contain one of its required literals, so the
# classifier looks for those (bytes.find on the lowercased chunk, which runs at
# memory speed) and only runs the regexes on lines that contain one.

try:  # Python >= 3.11
    from re import _constants as _sre_c  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_c
    import sre_parse as _sre_parse


def required_literals(pattern: str) -> tuple[bytes, ...] | None:
    """Lowercased literals of which every match of ``pattern`` contains at least one.

    None when no literal of at least three ASCII characters is required (the
    classifier then runs the pattern on every line).
    """
    try:
        parsed = _sre_parse.parse(pattern)
    except re.error:
        return None
    best = _required(list(parsed))
    if not best:
        return None
    return tuple(sorted({b.lower() for b in best}))


def _score(alternatives: list[bytes] | None) -> int:
    return min((len(a) for a in alternatives), default=0) if alternatives else 0


def _required(items: list[Any]) -> list[bytes] | None:
    """Best set of alternative literals required by a parsed sequence."""
    candidates = _candidates(items)
    if not candidates:
        return None
    best = max(candidates, key=_score)
    return best if _score(best) >= _MIN_LITERAL else None


def _candidates(items: list[Any]) -> list[list[bytes]]:
    """Every set of alternative literals the sequence requires (each set: one of them occurs)."""
    candidates: list[list[bytes]] = []
    run = bytearray()

    def flush() -> None:
        if len(run) >= _MIN_LITERAL:
            candidates.append([bytes(run)])
        run.clear()

    for op, arg in items:
        if op is _sre_c.LITERAL and arg < 128:
            run.append(arg)
            continue
        flush()
        sub: list[bytes] | None = None
        if op is _sre_c.SUBPATTERN:
            sub = _required(list(arg[-1]))
        elif op is _sre_c.BRANCH:
            branches = [_required(list(b)) for b in arg[1]]
            if all(branches):
                sub = sorted({x for b in branches for x in b or ()})
        elif op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT) and arg[0] >= 1:
            sub = _required(list(arg[2]))
        if sub:
            candidates.append(sub)
    flush()
    return candidates


def all_required_literals(pattern: str) -> tuple[tuple[bytes, ...], ...]:
    """Every set of lowercased literals a match must contain one of (a cheap check before the regex)."""
    try:
        parsed = _sre_parse.parse(pattern)
    except re.error:
        return ()
    return tuple(tuple(sorted({b.lower() for b in alts})) for alts in _candidates(list(parsed)))
