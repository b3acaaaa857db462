"""The learned second opinion: a linear model over TF-IDF of normalised error lines.

Used only when no signature fires (``diagnose`` would say ``unknown``). The model is a JSON file in
this package (``model/analyze_model.json``: vocabulary, idf weights, coefficients, intercepts, the
abstain threshold and the sha256 of its training data), written by ``scripts/train_analyze_model.py``
with scikit-learn. Predicting needs only numpy, and loading never unpickles anything: a model file is
data, never code.

The text the model sees is what the classifier keeps of a log in bounded memory (``Evidence``): the
lines that matched any signature with their context, the last matched lines of each source and the
tail of each source. Of those, the *error lines* (lines with an error word) are normalised (lower
case, no ANSI, no numbers, addresses, hashes or directories) and tokenised into words and word pairs,
and, when the model file says so (``char_ngrams``), the character n-grams of each word (``#`` + n
characters of ``<word>``), which let related spellings (hipErrorX, HIP_ERROR_X) share weight.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from gatekeeper.core import files
from gatekeeper.core.errors import InputError

__all__ = [
    "MODEL_SCHEMA",
    "LearnedModel",
    "Prediction",
    "builtin_model",
    "builtin_model_path",
    "char_ngrams",
    "error_lines",
    "evidence_text",
    "load_model",
    "tokens",
]

MODEL_SCHEMA = "gatekeeper.analyze_model/v1"
_REBUILD = "rebuild it: python scripts/train_analyze_model.py"
MAX_LINES = 200  # error lines fed to the model: bounds the work per diagnosis

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\^\[\[[0-9;]*m")
_ERROR_WORD = re.compile(
    r"(?i)error|fail|fatal|exception|abort|killed|kill |timed? ?out|denied|not found|cannot|can't|unable|"
    r"mismatch|invalid|warn|segmentation|sig[a-z]{2,4}\b|signal|exit|assert|oom\b|out of memory|memory|crash|"
    r"core dumped|unsupported|not supported|missing|no such|refused|reset|hang|traceback|panic|violation|"
    r"exceed|differ|nan\b|undefined|unrecognized"
)
_NORMALISE: tuple[tuple[re.Pattern[str], Any], ...] = (
    (re.compile(r"https?://\S+"), " url "),
    (re.compile(r"0x[0-9a-fA-F]+"), " hex "),
    (re.compile(r"\b[0-9a-fA-F]{12,}\b"), " hex "),
    # a path keeps its last component (hip_memory.cpp, libamdhip64.so): directories are noise
    (
        re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.+~-]+){2,}[\\/]?"),
        lambda m: " " + re.split(r"[\\/]", m.group(0).rstrip("\\/"))[-1] + " ",
    ),
)
_WORD = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*")
_STOP = frozenset(("the", "a", "an", "of", "to", "in", "on", "at", "and", "or", "is", "for", "by", "with", "it", "be"))


def normalise(line: str) -> str:
    line = _ANSI.sub("", line)
    for pattern, repl in _NORMALISE:
        line = pattern.sub(repl, line)
    return line.lower()


def _words(line: str) -> list[str]:
    return [w for w in _WORD.findall(normalise(line)) if w not in _STOP and len(w) > 1]


def tokens(line: str, grams: tuple[int, int] | None = None) -> list[str]:
    """Words (numbers dropped) and adjacent word pairs of one normalised line; with ``grams``
    (lo, hi) also the character n-grams of each word (``char_ngrams``)."""
    words = _words(line)
    out = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
    if grams:
        out += _char_ngrams(words, *grams)
    return out


def _char_ngrams(words: Iterable[str], lo: int, hi: int) -> list[str]:
    out: list[str] = []
    for w in words:
        padded = f"<{w}>"
        if len(padded) < lo:  # shorter than the shortest gram: the padded word is one gram
            out.append("#" + padded)
            continue
        for k in range(lo, min(hi, len(padded)) + 1):
            out.extend("#" + padded[i : i + k] for i in range(len(padded) - k + 1))
    return out


def char_ngrams(line: str, lo: int, hi: int) -> list[str]:
    """``#`` + every n-gram (lo <= n <= hi characters) of ``<word>`` for each word of the normalised line."""
    return _char_ngrams(_words(line), lo, hi)


def error_lines(lines: Iterable[str]) -> list[str]:
    """The lines with an error word (all lines when none has one), deduplicated, at most MAX_LINES."""
    seen: dict[str, None] = {}
    for line in lines:
        stripped = line.strip()
        if stripped:
            seen.setdefault(stripped[:400], None)
    everything = list(seen)
    chosen = [x for x in everything if _ERROR_WORD.search(x)] or everything
    return chosen[-MAX_LINES:]


def evidence_text(evidence: Any) -> list[str]:
    """The lines of an ``Evidence`` the model reads: matches with context, recent matches, tails."""
    lines: list[str] = []
    for matches in evidence.matches.values():
        for m in matches:
            lines.extend((*m.before, m.text, *m.after))
    for recent in getattr(evidence, "recent", {}).values():
        lines.extend(recent)
    for tail in evidence.tails.values():
        lines.extend(tail)
    return error_lines(lines)


@dataclass(frozen=True)
class Prediction:
    category: str
    probability: float  # of the chosen category (softmax over the classes)
    abstained: bool  # below the model's threshold: the answer stays `unknown`
    ranking: tuple[tuple[str, float], ...]  # every class, most likely first


@dataclass(frozen=True)
class LearnedModel:
    classes: tuple[str, ...]
    vocabulary: Mapping[str, int]
    idf: Sequence[float]
    coef: Sequence[Sequence[float]]  # one row per class
    intercept: Sequence[float]
    threshold: float
    training: Mapping[str, Any]  # digest, logs, split, cross-validated figures
    path: str = ""
    char_ngrams: tuple[int, int] | None = None  # (lo, hi) when the model was trained with them

    def features(self, lines: Sequence[str]) -> Any:
        """The L2-normalised TF-IDF row (sublinear tf), as numpy: the same transform as training."""
        import numpy as np

        counts: dict[int, int] = {}
        for line in lines:
            for tok in tokens(line, self.char_ngrams):
                j = self.vocabulary.get(tok)
                if j is not None:
                    counts[j] = counts.get(j, 0) + 1
        x = np.zeros(len(self.idf))
        for j, n in counts.items():
            x[j] = (1.0 + math.log(n)) * self.idf[j]
        norm = float(np.linalg.norm(x))
        return x / norm if norm > 0 else x

    @cached_property
    def _arrays(self) -> tuple[Any, Any]:
        """coef and intercept as numpy, converted once per model rather than once per prediction."""
        import numpy as np

        return np.asarray(self.coef), np.asarray(self.intercept)

    def predict(self, lines: Sequence[str]) -> Prediction:
        import numpy as np

        x = self.features(lines)
        if not x.any():  # nothing the model knows: no opinion
            return Prediction("unknown", 0.0, True, ())
        coef, intercept = self._arrays
        scores = coef @ x + intercept
        probs = np.exp(scores - scores.max())
        probs /= probs.sum()
        order = np.argsort(-probs)
        ranking = tuple((self.classes[i], round(float(probs[i]), 4)) for i in order)
        best, p = ranking[0]
        return Prediction(best if p >= self.threshold else "unknown", p, p < self.threshold, ranking)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema": MODEL_SCHEMA,
            "classes": list(self.classes),
            "threshold": self.threshold,
            "training": dict(self.training),
            "vocabulary": sorted(self.vocabulary, key=self.vocabulary.__getitem__),
            "idf": [round(v, 5) for v in self.idf],
            "intercept": [round(v, 5) for v in self.intercept],
            "coef": [[round(v, 5) for v in row] for row in self.coef],
        }
        if self.char_ngrams:
            doc["char_ngrams"] = list(self.char_ngrams)
        return doc


def builtin_model_path() -> Path:
    return Path(str(resources.files(__package__).joinpath("model", "analyze_model.json")))


def load_model(path: str | Path) -> LearnedModel:
    """A model file (JSON only; never a pickle); a malformed one is an InputError naming the file."""
    try:  # the strict reader: bounded, a regular file, no duplicate key (a decoy weight), bounded numbers
        doc = files.read_json(path, what="model file")
    except InputError as err:
        raise InputError(err.path, err.where, err.problem, _REBUILD) from None
    problem = _check(doc)
    if problem:
        raise InputError(path, "", f"invalid model file: {problem}", _REBUILD)
    return LearnedModel(
        classes=tuple(doc["classes"]),
        vocabulary={tok: j for j, tok in enumerate(doc["vocabulary"])},
        idf=tuple(float(v) for v in doc["idf"]),
        coef=tuple(tuple(float(v) for v in row) for row in doc["coef"]),
        intercept=tuple(float(v) for v in doc["intercept"]),
        threshold=float(doc["threshold"]),
        training=doc["training"],
        path=str(path),
        char_ngrams=(doc["char_ngrams"][0], doc["char_ngrams"][1]) if doc.get("char_ngrams") else None,
    )


def _check(doc: Any) -> str:
    if not isinstance(doc, dict) or doc.get("schema") != MODEL_SCHEMA:
        return f"schema is not {MODEL_SCHEMA}"
    need = ("classes", "vocabulary", "idf", "coef", "intercept", "threshold", "training")
    missing = [k for k in need if k not in doc]
    if missing:
        return f"missing {', '.join(missing)}"
    n_cls, n_voc = len(doc["classes"]), len(doc["vocabulary"])
    if len(doc["idf"]) != n_voc or len(doc["intercept"]) != n_cls or len(doc["coef"]) != n_cls:
        return "array sizes do not match classes and vocabulary"
    if any(not isinstance(row, list) or len(row) != n_voc for row in doc["coef"]):
        return "a coefficient row does not match the vocabulary"
    if not isinstance(doc["threshold"], (int, float)) or not 0 <= doc["threshold"] <= 1:
        return "threshold is not a number in [0, 1]"
    grams = doc.get("char_ngrams")
    if grams is not None and not (
        isinstance(grams, list)
        and len(grams) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 10 for v in grams)
        and grams[0] <= grams[1]
    ):
        return "char_ngrams is not [lo, hi] with 1 <= lo <= hi <= 10"
    if not isinstance(doc["training"], dict) or not isinstance(doc["training"].get("digest"), str):
        return "training.digest (sha256 of the training data) is missing"
    return ""


@cache
def builtin_model() -> LearnedModel | None:
    """The packaged model, or None when it is not installed or numpy is missing (rules alone then)."""
    try:
        import numpy  # noqa: F401
    except ImportError:  # pragma: no cover - numpy comes with scipy, a dependency
        return None
    path = builtin_model_path()
    return load_model(path) if path.is_file() else None
