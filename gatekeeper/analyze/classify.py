"""Stream logs through the failure signatures, in memory bounded by bytes, whatever the logs hold.

Logs are read in chunks of a few MB cut at a newline. Each rule pattern has
required literals (``rules.required_literals``); ``bytes.find`` over the
lowercased chunk finds the few lines that contain one, and only those lines
are decoded and matched against the regexes. What is kept is bounded by bytes,
independent of line length and of the number of logs: a chunk (one at a time),
a capped number of stored matches per rule (each line cut to ``MAX_TEXT``), and
per source a tail and its last matched lines, each line cut to ``MAX_KEPT_LINE``
bytes and all sources together to ``MAX_KEPT_BYTES`` (the oldest sources' go
first, and the diagnosis counts them).
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from gatekeeper.analyze.rules import Rule, RuleSet, all_required_literals, required_literals
from gatekeeper.core.errors import InputError

__all__ = ["Classifier", "Evidence", "RuleMatch"]

CHUNK_BYTES = 2 << 20  # bounds memory: the chunk, its lowercase copy and its keyword hits
MAX_TEXT = 400  # characters of a matched line kept in the report
# Bytes of log text (after gunzip) read in one analysis, over all sources: bounds the time a gzip bomb or an
# endless artifact can take (about 17 ns of CPU a byte here: 4 GiB in a bit over a minute). What is left
# unread is named in the diagnosis (``inputs[].truncated_after_bytes``), never silently dropped.
MAX_INPUT_BYTES = 4 * 2**30
# Characters of candidate lines (those holding a signature's literals) handed to the regexes in one analysis.
# Crafted lines cost up to about 2 µs a character (benchmarks/README.md, "hostile"): this bounds such a log at
# about four minutes. A generated 50 MB CI log hands over almost nothing, the corpus's error excerpts half their
# text; a real log would have to hold 128 MiB of such lines to reach it (and is then named as not read to the end).
MAX_MATCHED_CHARS = 128 * 2**20
# Characters of one line that a signature's regex sees, at its start and at its end (see _views): bounds
# the backtracking of patterns like "NCCL WARN.*failed" on hostile lines (a 1.9 MB line repeating
# "NCCL WARN" kept one analyze busy for more than 10 minutes before this bound).
MAX_MATCH = 1024
RECENT_LINES = 10  # last matched lines kept per source (the error before the exit, for the learned model)
# A line kept in a source's tail: its first and last MAX_MATCH bytes (what the signatures see of it, _views).
# A log without a newline was one 8 MB "line" per chunk, forty of them per source (issue 23).
MAX_KEPT_LINE = 2 * MAX_MATCH
_CUT = b" [...] "
# Tails and recent matched lines of all sources together: past it, the oldest sources' are dropped
# (Evidence.dropped_sources counts them). 40 lines of MAX_KEPT_LINE are 80 KiB: about 50 full tails.
MAX_KEPT_BYTES = 4 * 2**20
# (rule index, pattern, literal sets that must all be present) for one keyword of the prefilter
Target = tuple[int, "re.Pattern[str]", tuple[tuple[bytes, ...], ...]]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\^\[\[[0-9;]*m")


@dataclass(frozen=True)
class RuleMatch:
    source: str
    line: int
    text: str
    rule: str
    category: str
    priority: int
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    order: int = 0  # position in the scan, for "which came first"

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "line": self.line,
            "text": self.text,
            "rule": self.rule,
            "category": self.category,
            "context": {"before": list(self.before), "after": list(self.after)},
        }


@dataclass
class Evidence:
    """What the scan found: capped matches per rule, counts, and per-source facts."""

    matches: dict[str, list[RuleMatch]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)  # source -> lines read
    tails: dict[str, list[str]] = field(default_factory=dict)
    # rule id -> (source number, line) of its last match, uncapped: "what came last before the exit"
    last: dict[str, tuple[int, int]] = field(default_factory=dict)
    recent: dict[str, deque[str]] = field(default_factory=dict)  # source -> its last matched lines
    bytes_read: int = 0  # over all sources, against the classifier's max_input_bytes
    matched_chars: int = 0  # of candidate lines given to the regexes, against max_matched_chars
    truncated: dict[str, int] = field(default_factory=dict)  # source -> bytes read when the budget ran out
    kept_bytes: dict[str, int] = field(default_factory=dict)  # source -> UTF-8 bytes of its tail and recent lines
    dropped_sources: int = 0  # sources whose tail and recent lines went for MAX_KEPT_BYTES


class Classifier:
    def __init__(
        self,
        rules: RuleSet,
        *,
        context: int = 2,
        per_rule: int = 5,
        tail: int = 40,
        chunk_bytes: int = CHUNK_BYTES,
        max_input_bytes: int = MAX_INPUT_BYTES,
        max_matched_chars: int = MAX_MATCHED_CHARS,
        max_kept_bytes: int = MAX_KEPT_BYTES,
    ) -> None:
        self.rules = rules.rules
        self.context = context
        self.per_rule = per_rule
        self.tail = tail
        self.chunk_bytes = chunk_bytes
        self.max_input_bytes = max_input_bytes
        self.max_matched_chars = max_matched_chars
        self.max_kept_bytes = max_kept_bytes
        self.evidence = Evidence()
        self._order = 0
        self._source_no = 0
        self._index, self._unfiltered = _build_index(self.rules)
        self._own_output = frozenset(i for i, r in enumerate(self.rules) if r.reads_own_output)
        self._skip: frozenset[int] = frozenset()
        self._automaton = _automaton([kw for kw, _ in self._index])

    def _hits(self, low: bytes) -> dict[int, list[Target]]:
        """Line start -> the patterns whose required literal occurs in that line."""
        if self._automaton is not None:
            # (keyword, start, end); the hits of one line are mostly adjacent.
            found = self._automaton.find_matches_as_indexes(low, overlapping=True)
            positions: Iterator[tuple[int, int]] = ((end - 1, k) for k, _start, end in found)
        else:
            positions = iter(sorted(_find_all(low, [kw for kw, _ in self._index])))
        hits: dict[int, list[Target]] = {}
        keywords_of: dict[int, set[int]] = {}
        line_start, line_end = 0, -1
        for pos, k in positions:
            if not line_start <= pos <= line_end:  # usually the same line as the previous hit
                line_start = low.rfind(b"\n", 0, pos) + 1
                line_end = low.find(b"\n", pos)
                targets = hits.setdefault(line_start, [])
                keywords = keywords_of.setdefault(line_start, set())
            if k not in keywords:
                keywords.add(k)
                targets.extend(self._index[k][1])
        return hits

    # -- input --------------------------------------------------------------
    def scan(self, stream: BinaryIO, source: str) -> None:
        """Read ``stream`` to its end, recording matches under ``source``; when a budget of this classifier runs out
        first (``max_input_bytes`` read, or ``max_matched_chars`` matched, over all sources), the source is named in
        ``evidence.truncated`` with the bytes of it that were read."""
        ev = self.evidence
        ev.sources[source] = ev.sources.get(source, 0)
        self._source_no = list(ev.sources).index(source)
        tail: deque[bytes] = deque(maxlen=max(self.tail, self.context, 20))
        rest = b""
        read = 0
        try:
            while True:
                spent = ev.matched_chars >= self.max_matched_chars
                left = 0 if spent else self.max_input_bytes - ev.bytes_read
                block = stream.read(min(self.chunk_bytes, left)) if left > 0 else b""
                if not block:
                    if left <= 0 and stream.read(1):  # the budget ran out before this source did
                        ev.truncated[source] = read
                    break
                read += len(block)
                ev.bytes_read += len(block)
                data = rest + block
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    rest = data
                    if len(rest) > 4 * self.chunk_bytes:  # one gigantic line: process what we have
                        self._chunk(rest + b"\n", source, tail)
                        rest = b""
                    continue
                rest = data[cut:]
                self._chunk(data[:cut], source, tail)
            if rest:
                self._chunk(rest + b"\n", source, tail)
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise InputError(source, "", f"corrupt or truncated gzip log: {err}", "re-download the log") from None
        ev.tails[source] = [_clean(x) for x in list(tail)[-self.tail :]]
        self._keep_within_budget(source)

    def _keep_within_budget(self, source: str) -> None:
        """Count what ``source`` keeps; drop the oldest sources' tails and recent lines past ``max_kept_bytes``."""
        ev = self.evidence
        kept = [*ev.tails.get(source, ()), *ev.recent.get(source, ())]
        ev.kept_bytes[source] = sum(len(x.encode("utf-8", "replace")) for x in kept)
        total = sum(ev.kept_bytes.values())
        for old in list(ev.kept_bytes):
            if total <= self.max_kept_bytes or old == source:
                break
            total -= ev.kept_bytes.pop(old)
            ev.tails.pop(old, None)
            ev.recent.pop(old, None)
            ev.dropped_sources += 1
        tail = ev.tails.get(source, [])
        while total > self.max_kept_bytes and tail:  # a budget smaller than one tail: its oldest lines go
            cut = len(tail.pop(0).encode("utf-8", "replace"))
            total -= cut
            ev.kept_bytes[source] -= cut

    def scan_text(self, text: str, source: str, *, artifact: bool = False) -> None:
        """Scan ``text`` as one more source. ``artifact``: a message a stage recorded from the code it checked
        (a failed check's message): gatekeeper's own-output signatures (``Rule.reads_own_output``) do not read
        it, so a forged "gatekeeper: blocking gate ..." line there adds no category."""
        self._skip = self._own_output if artifact else frozenset()
        try:
            self.scan(io.BytesIO(text.encode("utf-8", "replace")), source)
        finally:
            self._skip = frozenset()

    # -- one chunk ------------------------------------------------------------
    def _chunk(self, chunk: bytes, source: str, tail: deque[bytes]) -> None:
        ev = self.evidence
        low = chunk.lower()
        hits = self._hits(low)
        if self._unfiltered:
            text = chunk.decode("utf-8", "replace")
            for rule_idx, pattern in self._unfiltered:
                for m in pattern.finditer(text):
                    start = len(text[: text.rfind("\n", 0, m.start()) + 1].encode("utf-8", "replace"))
                    hits.setdefault(start, []).append((rule_idx, pattern, ()))
        base = ev.sources[source]
        counted_to, newlines = 0, 0
        prev = tuple(tail)
        for start in sorted(hits):
            newlines += chunk.count(b"\n", counted_to, start)
            counted_to = start
            end = chunk.find(b"\n", start)
            line: str | None = None
            seen: set[int] = set()
            owned = False
            low_line = low[start:end]
            # a signature that owns its lines goes first: when it matches, no other signature reads the line
            for rule_idx, pattern, needs in sorted(hits[start], key=lambda t: not self.rules[t[0]].owns_line):
                if owned:
                    break
                # Every required literal must be there before the (slower) regex runs.
                if rule_idx in seen or rule_idx in self._skip:
                    continue
                if not all(any(a in low_line for a in alts) for alts in needs):
                    continue
                if line is None:
                    line = _clean(chunk[start:end])  # decoded only for lines that get this far
                    views = _views(line)
                    ev.matched_chars += sum(len(v) for v in views)
                if not any(pattern.search(v) for v in views):
                    continue
                rule = self.rules[rule_idx]
                seen.add(rule_idx)
                if rule.preceded_by is not None and not any(
                    rule.preceded_by.search(v) for b in _before(chunk, start, rule.within, prev) for v in _views(b)
                ):
                    continue
                self._record(rule, source, base + newlines + 1, line, chunk=chunk, start=start, end=end, prev=prev)
                owned = rule.owns_line
        ev.sources[source] = base + chunk.count(b"\n")
        tail.extend(_last_lines(chunk, tail.maxlen or 0))

    def _record(
        self, rule: Rule, source: str, lineno: int, line: str, *, chunk: bytes, start: int, end: int, prev: tuple
    ) -> None:
        ev = self.evidence
        ev.counts[rule.id] = ev.counts.get(rule.id, 0) + 1
        ev.last[rule.id] = (self._source_no, lineno)
        recent = ev.recent.setdefault(source, deque(maxlen=RECENT_LINES))
        if not recent or recent[-1] != line[:MAX_TEXT]:
            recent.append(line[:MAX_TEXT])
        stored = ev.matches.setdefault(rule.id, [])
        if len(stored) >= self.per_rule:
            return
        self._order += 1
        stored.append(
            RuleMatch(
                source=source,
                line=lineno,
                text=line[:MAX_TEXT],
                rule=rule.id,
                category=rule.category,
                priority=rule.priority,
                before=tuple(x[:MAX_TEXT] for x in _before(chunk, start, self.context, prev)),
                after=tuple(x[:MAX_TEXT] for x in _after(chunk, end, self.context)),
                order=self._order,
            )
        )


def _automaton(keywords: list[bytes]) -> Any:
    """One Aho-Corasick pass over a chunk finds every keyword (ahocorasick-rs, Rust, GB/s).

    Without the library, ``bytes.find`` per keyword (memory speed, but one pass per keyword).
    """
    if not keywords:
        return None
    try:
        import ahocorasick_rs
    except ImportError:  # pragma: no cover - it is a declared dependency
        return None
    return ahocorasick_rs.BytesAhoCorasick(keywords)


def _find_all(low: bytes, keywords: list[bytes]) -> Iterator[tuple[int, int]]:
    for k, keyword in enumerate(keywords):
        pos = low.find(keyword)
        while pos >= 0:
            yield pos, k
            pos = low.find(keyword, pos + 1)


def _build_index(rules: tuple[Rule, ...]) -> tuple[list[tuple[bytes, list[Target]]], list[tuple[int, re.Pattern[str]]]]:
    by_keyword: dict[bytes, list[Target]] = {}
    unfiltered: list[tuple[int, re.Pattern[str]]] = []
    for i, rule in enumerate(rules):
        for pattern in rule.patterns:
            literals = required_literals(pattern.pattern)
            if literals is None:
                unfiltered.append((i, re.compile(pattern.pattern, pattern.flags | re.MULTILINE)))
                continue
            needs = all_required_literals(pattern.pattern)
            for lit in literals:
                by_keyword.setdefault(lit, []).append((i, pattern, needs))
    # A line containing "hip out of memory" contains "out of memory": search only the shorter one.
    kept: list[tuple[bytes, list[Target]]] = []
    for kw in sorted(by_keyword, key=len):
        for short, targets in kept:
            if short in kw:
                targets.extend(by_keyword[kw])
                break
        else:
            kept.append((kw, list(by_keyword[kw])))
    return kept, unfiltered


def _views(line: str) -> tuple[str, ...]:
    """What the signatures see of a line: all of it, or, past MAX_MATCH characters, its start, its end and the
    start of its last carriage-return segment (the final redraw of a progress bar). Error messages sit there
    in real logs; a regex's cost on one line stays bounded whatever the line holds."""
    if len(line) <= MAX_MATCH:
        return (line,)
    cr = line.rfind("\r")
    ends = (line[:MAX_MATCH], line[-MAX_MATCH:])
    return ends if cr == -1 else (*ends, line[cr + 1 :][:MAX_MATCH])  # without a \r that view is the start again


def _clean(raw: bytes) -> str:
    return _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip("\r\n")


def _before(chunk: bytes, start: int, n: int, prev: tuple[bytes, ...]) -> list[str]:
    out: list[str] = []
    end = start - 1
    while len(out) < n and end >= 0:
        begin = chunk.rfind(b"\n", 0, end) + 1
        out.append(_clean(chunk[begin:end]))
        end = begin - 1
    missing = n - len(out)
    if missing > 0 and prev:
        out.extend(_clean(x) for x in reversed(prev[-missing:]))
    return out[::-1]


def _after(chunk: bytes, end: int, n: int) -> list[str]:
    out: list[str] = []
    pos = end + 1
    while len(out) < n and pos < len(chunk):
        nxt = chunk.find(b"\n", pos)
        nxt = len(chunk) if nxt < 0 else nxt
        out.append(_clean(chunk[pos:nxt]))
        pos = nxt + 1
    return out


def _kept(line: bytes) -> bytes:
    """A line as a tail keeps it: whole up to MAX_KEPT_LINE bytes, else its first and last MAX_MATCH bytes."""
    if len(line) <= MAX_KEPT_LINE:
        return line
    return line[:MAX_MATCH] + _CUT + line[-MAX_MATCH:]


def _last_lines(chunk: bytes, n: int) -> list[bytes]:
    out: list[bytes] = []
    end = len(chunk) - 1  # chunk ends with a newline
    while len(out) < n and end > 0:
        begin = chunk.rfind(b"\n", 0, end) + 1
        out.append(_kept(chunk[begin:end]))  # a copy of at most MAX_KEPT_LINE bytes, never a view of the chunk
        end = begin - 1
    return out[::-1]
