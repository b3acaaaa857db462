"""The labelled corpus of real failure logs: its frozen train/test split and accuracy figures.

The corpus lives in ``tests/fixtures/logs`` (``index.jsonl``: one object per log with ``file``,
``category``, ``split`` and provenance). The split is a pure function of the file name
(``split_of``), so it cannot drift when logs are added, and it was frozen before any signature
was tuned on the new logs: rules and the learned model are written and trained on ``train`` only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatekeeper.core.errors import InputError

__all__ = ["SPLIT_SALT", "CategoryScore", "Scores", "read_index", "score", "split_of", "training_digest"]

SPLIT_SALT = "gatekeeper-split-v1:"
SPLITS = ("train", "test")


def split_of(file_name: str) -> str:
    """``test`` for a third of the names (sha256 of salt + name, mod 3 == 0), else ``train``."""
    digest = hashlib.sha256((SPLIT_SALT + file_name).encode("utf-8")).hexdigest()
    return "test" if int(digest, 16) % 3 == 0 else "train"


def read_index(path: str | Path) -> list[dict[str, Any]]:
    """The entries of an ``index.jsonl``; a line that is not a JSON object with file/category/split is an error."""
    entries: list[dict[str, Any]] = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(path, f"{lineno}:{err.colno}", f"invalid JSON: {err.msg}", "one object per line") from None
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("file", "category", "split")):
            raise InputError(path, f"{lineno}:1", "an entry needs string file, category and split", "fix the entry")
        if entry["split"] not in SPLITS:
            raise InputError(path, f"{lineno}:1", f"split {entry['split']!r} is not train or test", "use split_of()")
        entries.append(entry)
    return entries


def training_digest(entries: Iterable[Mapping[str, Any]], root: str | Path) -> str:
    """sha256 over (file, label, sha256 of the log's bytes) of every ``train`` entry, in file order."""
    h = hashlib.sha256()
    for entry in sorted((e for e in entries if e["split"] == "train"), key=lambda e: e["file"]):
        body = hashlib.sha256((Path(root) / entry["file"]).read_bytes()).hexdigest()
        h.update(f"{entry['file']}\t{entry['category']}\t{body}\n".encode())
    return h.hexdigest()


@dataclass(frozen=True)
class CategoryScore:
    category: str
    logs: int  # labelled with this category
    correct: int
    predicted: int  # answers naming this category (right or wrong)
    abstained: int  # logs of this category answered `unknown`

    @property
    def recall(self) -> float | None:
        return self.correct / self.logs if self.logs else None

    @property
    def precision(self) -> float | None:
        return self.correct / self.predicted if self.predicted else None

    @property
    def abstain_rate(self) -> float | None:
        return self.abstained / self.logs if self.logs else None


@dataclass(frozen=True)
class Scores:
    total: int
    correct: int
    answered: int  # non-`unknown` answers
    answered_correct: int
    categories: tuple[CategoryScore, ...]

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    @property
    def answered_precision(self) -> float | None:
        """Precision of the non-``unknown`` answers: how often a named category is right."""
        return self.answered_correct / self.answered if self.answered else None

    @property
    def abstain_rate(self) -> float:
        return (self.total - self.answered) / self.total if self.total else 0.0


def score(pairs: Sequence[tuple[str, str]], categories: Sequence[str]) -> Scores:
    """Scores of (label, answer) pairs; ``unknown`` answers are abstentions."""
    rows = []
    for cat in categories:
        rows.append(
            CategoryScore(
                category=cat,
                logs=sum(label == cat for label, _ in pairs),
                correct=sum(label == cat and got == cat for label, got in pairs),
                predicted=sum(got == cat for _, got in pairs),
                abstained=sum(label == cat and got == "unknown" for label, got in pairs),
            )
        )
    answered = [(label, got) for label, got in pairs if got != "unknown"]
    return Scores(
        total=len(pairs),
        correct=sum(label == got for label, got in pairs),
        answered=len(answered),
        answered_correct=sum(label == got for label, got in answered),
        categories=tuple(rows),
    )
