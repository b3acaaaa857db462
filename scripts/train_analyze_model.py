"""Rebuild the learned second opinion of `gatekeeper analyze` from the train split of the corpus.

    pip install -e ".[ml]"
    python scripts/train_analyze_model.py [--check]

Reads tests/fixtures/logs/index.jsonl, takes the logs with "split": "train" only (the test split is
never read), turns each log into the text the analyzer keeps of it (matched lines with context, last
matched lines, tail; error lines only, normalised: gatekeeper/analyze/learned.py), and fits TF-IDF
(sublinear tf; words, word pairs and the character 4-grams of each word, each seen in at least two
training texts) + multinomial logistic regression.

Each log is used twice: as it is, and with the lines a signature matched removed ("what is left when
the rules miss"), because the model is asked only when no signature fired. The abstain threshold is
the lowest probability at which the cross-validated answers on those rule-less texts (5 folds,
seeded) are at least 95% right. The model is written as JSON (never a pickle) to
gatekeeper/analyze/model/analyze_model.json with the sha256 of its training data
(corpus.training_digest): tests/analyze/test_analyze_model.py fails when the train split changed and
the model was not rebuilt. --check only verifies that the recorded digest is current (exit 1 if not).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gatekeeper.analyze.classify import Classifier  # noqa: E402
from gatekeeper.analyze.corpus import read_index, training_digest  # noqa: E402
from gatekeeper.analyze.learned import LearnedModel, builtin_model_path, evidence_text, load_model, tokens  # noqa: E402
from gatekeeper.analyze.logs import open_log  # noqa: E402
from gatekeeper.analyze.rules import load_rules  # noqa: E402
from gatekeeper.core import files  # noqa: E402

LOGS = ROOT / "tests" / "fixtures" / "logs"
SEED = 20261203
C = 10.0  # inverse regularisation of the logistic regression
MIN_DF = 2  # a token must occur in at least two training texts
# Character 4-grams of each word, besides words and word pairs: in the 5-fold cross-validation on the
# 315 train logs of round 4 the model answered 248 of 630 texts (236 right) at the threshold rule's 95%,
# against 203 (193 right) with words and pairs alone; of the texts without their signature lines,
# 50 answered, 45 right (words alone: 38, 32). 3- to 5-grams did as well with twice the vocabulary;
# class weights and other C values did not help.
CHAR_NGRAMS = (4, 4)
TARGET_PRECISION = 0.95
THRESHOLD_FLOOR = 0.3


def texts(path: Path, rules) -> tuple[list[str], list[str]]:
    """(the model's lines of this log, the same without the lines a category signature matched)."""
    clf = Classifier(rules)
    with open_log(path) as stream:
        clf.scan(stream, path.name)
    ev = clf.evidence
    lines = evidence_text(ev)
    by_rule = {r.id: r for r in rules.rules}
    signed = {m.text.strip()[:400] for rid, ms in ev.matches.items() if by_rule[rid].category != "unknown" for m in ms}
    return lines, [x for x in lines if x not in signed]


def doc(lines: list[str]) -> list[str]:
    return [tok for line in lines for tok in tokens(line, CHAR_NGRAMS)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that the model's training digest is current")
    parser.add_argument("--out", default=str(builtin_model_path()), help="model file (default: the packaged one)")
    args = parser.parse_args(argv)

    entries = [e for e in read_index(LOGS / "index.jsonl") if e["split"] == "train"]
    digest = training_digest(entries, LOGS)
    if args.check:
        recorded = load_model(args.out).training.get("digest")
        print(f"train split digest {digest}; model records {recorded}")
        return 0 if recorded == digest else 1

    import numpy as np
    import sklearn
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    rules = load_rules()
    full, bare, labels = [], [], []
    for e in entries:
        lines, without = texts(LOGS / e["file"], rules)
        full.append(doc(lines))
        bare.append(doc(without))
        labels.append(e["category"])
    y = np.array(labels)

    def fit(docs: list[list[str]], ys: list[str]) -> tuple[TfidfVectorizer, LogisticRegression]:
        vec = TfidfVectorizer(analyzer=lambda d: d, sublinear_tf=True, min_df=MIN_DF, norm="l2")
        x = vec.fit_transform(docs)
        lr = LogisticRegression(C=C, max_iter=5000, random_state=SEED)
        lr.fit(x, ys)
        return vec, lr

    # Cross-validated probabilities on held-out logs, as they are and without their signature lines
    # (the model's real job lies in between: logs whose wording no signature knows).
    n = len(y)
    probs = np.zeros(2 * n)
    right = np.zeros(2 * n, dtype=bool)
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=SEED)
    for tr, te in folds.split(np.zeros(n), y):
        vec, lr = fit([full[i] for i in tr] + [bare[i] for i in tr], [*y[tr], *y[tr]])
        for offset, docs in ((0, full), (n, bare)):
            p = lr.predict_proba(vec.transform([docs[i] for i in te]))
            probs[te + offset] = p.max(axis=1)
            right[te + offset] = lr.classes_[p.argmax(axis=1)] == y[te]
    threshold = 1.0
    for t in sorted({round(float(v), 2) for v in probs} | {THRESHOLD_FLOOR}, reverse=True):
        if t < THRESHOLD_FLOOR:
            break
        answered = probs >= t
        if answered.any() and right[answered].mean() >= TARGET_PRECISION:
            threshold = t
    cv: dict = {
        "folds": 5,
        "threshold_rule": f"lowest probability >= {THRESHOLD_FLOOR} with answered precision >= {TARGET_PRECISION}",
        "logs": n,
    }
    for name, part in (("as_is", slice(0, n)), ("signature_lines_removed", slice(n, 2 * n))):
        answered = probs[part] >= threshold
        cv[name] = {
            "accuracy_without_threshold": round(float(right[part].mean()), 3),
            "answered": int(answered.sum()),
            "answered_correct": int(right[part][answered].sum()),
        }
    # The threshold rule pools both halves; the rule-less half alone is what the model faces in use.
    cv["signature_lines_removed"]["answered_precision"] = round(
        cv["signature_lines_removed"]["answered_correct"] / max(cv["signature_lines_removed"]["answered"], 1), 3
    )

    vec, lr = fit(full + bare, [*labels, *labels])
    vocab = vec.vocabulary_
    model = LearnedModel(
        classes=tuple(str(c) for c in lr.classes_),
        vocabulary=vocab,
        idf=tuple(float(v) for v in vec.idf_),
        coef=tuple(tuple(float(v) for v in row) for row in lr.coef_),
        intercept=tuple(float(v) for v in lr.intercept_),
        threshold=threshold,
        char_ngrams=CHAR_NGRAMS,
        training={
            "digest": digest,
            "digest_of": "corpus.training_digest: sha256 over file, label and sha256 of each train-split log",
            "index": "tests/fixtures/logs/index.jsonl",
            "split": "train",
            "logs": len(entries),
            "sklearn": sklearn.__version__,
            "C": C,
            "min_df": MIN_DF,
            "char_ngrams": list(CHAR_NGRAMS),
            "seed": SEED,
            "cross_validation": cv,
        },
    )
    # Compact (one line): 20k+ coefficients would be 20k+ lines with indentation.
    files.atomic_write(args.out, json.dumps(model.to_dict(), separators=(",", ":")) + "\n")
    print(
        f"wrote {args.out}: {len(vocab)} tokens, {len(model.classes)} classes, threshold {threshold}; "
        f"cross-validated on {n} train logs: {cv}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
