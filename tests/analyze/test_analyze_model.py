"""The learned second opinion: packaged model is current, JSON only, numpy only, asked only when rules abstain."""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.analyze import classify_logs
from gatekeeper.analyze.classify import Classifier
from gatekeeper.analyze.corpus import read_index, training_digest
from gatekeeper.analyze.diagnosis import diagnose
from gatekeeper.analyze.learned import (
    LearnedModel,
    builtin_model,
    builtin_model_path,
    char_ngrams,
    error_lines,
    load_model,
    tokens,
)
from gatekeeper.analyze.rules import load_rules
from gatekeeper.core.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"
# A train-split log no signature matches (a hang with no error line): the model's job.
RULELESS = LOGS / "gpu_hang_or_timeout__therock-pr4459-gfx1150-hipcc-check-hang.log"


def _tiny(threshold: float = 0.6) -> LearnedModel:
    vocab = ["vram", "exhausted", "vram exhausted", "queue", "stuck", "queue stuck"]
    return LearnedModel(
        classes=("device_oom", "gpu_hang_or_timeout"),
        vocabulary={t: i for i, t in enumerate(vocab)},
        idf=(1.0,) * 6,
        coef=((3.0, 3.0, 3.0, -3.0, -3.0, -3.0), (-3.0, -3.0, -3.0, 3.0, 3.0, 3.0)),
        intercept=(0.0, 0.0),
        threshold=threshold,
        training={"digest": "0" * 64},
    )


def _diagnose(text: str, model: LearnedModel | None):
    rules = load_rules()
    clf = Classifier(rules)
    clf.scan(io.BytesIO(text.encode()), "job.log")
    return diagnose(clf.evidence, rules, model=model)


def test_packaged_model_was_trained_on_the_current_train_split():
    # Adding, relabelling or moving a train log without rerunning scripts/train_analyze_model.py fails here.
    model = builtin_model()
    assert model is not None
    entries = read_index(LOGS / "index.jsonl")
    assert model.training["digest"] == training_digest(entries, LOGS)
    assert model.training["split"] == "train"
    assert model.training["logs"] == sum(e["split"] == "train" for e in entries)
    assert set(model.classes) == {e["category"] for e in entries}


def test_digest_changes_with_a_train_log_but_not_with_a_test_log(tmp_path):
    entries = read_index(LOGS / "index.jsonl")
    train = next(e for e in entries if e["split"] == "train")
    test = next(e for e in entries if e["split"] == "test")
    for e in (train, test):
        (tmp_path / e["file"]).write_bytes((LOGS / e["file"]).read_bytes())
    pair = [train, test]
    before = training_digest(pair, tmp_path)
    (tmp_path / test["file"]).write_text("edited\n")
    assert training_digest(pair, tmp_path) == before  # the test split is not training data
    (tmp_path / train["file"]).write_text("edited\n")
    assert training_digest(pair, tmp_path) != before
    assert training_digest([{**train, "category": "segfault"}, test], tmp_path) != training_digest(pair, tmp_path)


def test_predictions_need_only_numpy_not_sklearn():
    code = (
        "import sys; sys.modules['sklearn'] = None\n"  # import sklearn now raises ImportError
        "from gatekeeper.analyze import classify_logs\n"
        "from gatekeeper.analyze.rules import load_rules\n"
        f"d = classify_logs([{str(RULELESS)!r}], rules=load_rules())\n"
        "loaded = sorted(m for m, mod in sys.modules.items() if m.split('.')[0] == 'sklearn' and mod is not None)\n"
        "print(d.category, d.decided_by, loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["gpu_hang_or_timeout", "model", "[]"]


def test_the_model_is_asked_only_when_no_signature_fires():
    d = _diagnose("Segmentation fault (core dumped)\nvram exhausted vram exhausted\n", _tiny())
    assert (d.category, d.decided_by, d.model) == ("segfault", "rule", None)
    d = _diagnose("ERROR: step 3: vram exhausted\n", _tiny())
    assert (d.category, d.decided_by, d.known_issue, d.rule_source) == ("device_oom", "model", None, "model")
    assert d.model["probability"] >= 0.6
    assert not d.model["abstained"]
    assert d.explanation.startswith("No known signature matched; the learned second opinion")
    assert d.remediation  # the category's typical steps
    assert d.to_dict()["decided_by"] == "model"


def test_below_its_threshold_the_model_abstains_and_says_what_it_guessed():
    d = _diagnose("ERROR: vram exhausted, queue stuck\n", _tiny())  # evenly split: p = 0.5 < 0.6
    assert (d.category, d.decided_by, d.confidence) == ("unknown", "none", 0.0)
    assert d.model["abstained"] is True
    assert d.model["ranking"][0]["probability"] == 0.5


def test_words_the_model_never_saw_give_no_opinion():
    d = _diagnose("ERROR: frobnicator exploded\n", _tiny(threshold=0.0))
    assert d.category == "unknown"
    assert d.model["abstained"] is True


def test_rules_only_when_asked():
    d = classify_logs([RULELESS], rules=load_rules(), model=None)
    assert (d.category, d.model) == ("unknown", None)


def test_normalisation_drops_numbers_addresses_and_directories():
    assert tokens("E0412 12:01:02 /opt/rocm-6.2/lib/libamdhip64.so: 0x7ffd12 failed 42 times") == [
        "e0412",
        "libamdhip64.so",
        "hex",
        "failed",
        "times",
        "e0412 libamdhip64.so",
        "libamdhip64.so hex",
        "hex failed",
        "failed times",
    ]
    assert error_lines(["step 1 ok", "RuntimeError: boom", "RuntimeError: boom", "done"]) == ["RuntimeError: boom"]
    assert error_lines(["step 1 ok", "done"]) == ["step 1 ok", "done"]  # no error line: everything


def test_character_ngrams_of_each_word():
    assert char_ngrams("hipErrorNoDevice", 4, 4)[:3] == ["#<hip", "#hipe", "#iper"]
    assert char_ngrams("hipErrorNoDevice", 4, 4)[-1] == "#ice>"
    assert len(char_ngrams("hipErrorNoDevice", 4, 4)) == len("<hiperrornodevice>") - 3
    assert char_ngrams("ab", 4, 5) == ["#<ab>"]  # shorter than a gram: the padded word
    assert char_ngrams("abc", 4, 5) == ["#<abc", "#abc>", "#<abc>"]
    assert char_ngrams("0x7f 42 /opt/rocm/lib/x", 3, 3) == ["#<he", "#hex", "#ex>"]  # after normalisation
    assert tokens("hip failed", (4, 4)) == [
        "hip",
        "failed",
        "hip failed",
        "#<hip",
        "#hip>",
        "#<fai",
        "#fail",
        "#aile",
        "#iled",
        "#led>",
    ]
    assert tokens("hip failed") == ["hip", "failed", "hip failed"]


def test_numpy_predictions_match_scikit_learn_with_character_ngrams():
    # The model file is scored by numpy alone; it must give scikit-learn's own probabilities.
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    grams = (3, 5)
    texts = {
        "device_oom": ["hipErrorOutOfMemory while allocating", "HIP out of memory tried to allocate", "vram exhausted"],
        "device_not_available": ["hipErrorNoDevice no device", "HIP_ERROR_NoDevice at init", "no GPU found"],
        "segfault": ["Segmentation fault core dumped", "SIGSEGV in libfoo", "segfault at ip"],
    }
    docs = [tokens(line, grams) for lines in texts.values() for line in lines]
    labels = [c for c, lines in texts.items() for _ in lines]
    vec = TfidfVectorizer(analyzer=lambda d: d, sublinear_tf=True, norm="l2")
    lr = LogisticRegression(C=10.0, max_iter=5000).fit(vec.fit_transform(docs), labels)
    model = LearnedModel(
        classes=tuple(lr.classes_),
        vocabulary=vec.vocabulary_,
        idf=tuple(vec.idf_),
        coef=tuple(map(tuple, lr.coef_)),
        intercept=tuple(lr.intercept_),
        threshold=0.0,
        training={"digest": "0" * 64},
        char_ngrams=grams,
    )
    probe = ["HIP_ERROR_OutOfMemory on device", "hipErrorNoDevice"]
    expected = lr.predict_proba(vec.transform([[t for line in probe for t in tokens(line, grams)]]))[0]
    got = dict(model.predict(probe).ranking)
    assert [got[c] for c in lr.classes_] == pytest.approx(list(expected), abs=1e-4)
    # and the file round-trips the n-gram setting
    assert dataclasses.replace(model, char_ngrams=None).to_dict().get("char_ngrams") is None
    assert model.to_dict()["char_ngrams"] == [3, 5]


def test_a_model_file_is_json_never_a_pickle(tmp_path):
    bad = tmp_path / "model.json"
    bad.write_bytes(pickle.dumps({"schema": "gatekeeper.analyze_model/v1"}))
    with pytest.raises(InputError, match=r"not UTF-8 text: a binary file .* where a model file belongs; hint: rebuild"):
        load_model(bad)
    decoy = tmp_path / "decoy.json"  # the strict reader: a duplicate key is refused, not read as its last value
    decoy.write_text('{"schema": "x", "schema": "gatekeeper.analyze_model/v1"}', encoding="utf-8")
    with pytest.raises(InputError, match="duplicate key 'schema'"):
        load_model(decoy)
    source = (ROOT / "gatekeeper" / "analyze" / "learned.py").read_text()
    assert "pickle" not in source.replace("never unpickles", "").replace("never a pickle", "")
    assert "import sklearn" not in source


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(schema="other/v1"), "schema is not"),
        (lambda d: d["coef"][0].pop(), "coefficient row"),
        (lambda d: d.update(threshold=2), "threshold"),
        (lambda d: d["training"].pop("digest"), "training.digest"),
        (lambda d: d.pop("idf"), "missing idf"),
        (lambda d: d.update(char_ngrams=[5, 3]), "char_ngrams"),
        (lambda d: d.update(char_ngrams="4"), "char_ngrams"),
        (lambda d: d.update(char_ngrams=[0, 4]), "char_ngrams"),
    ],
)
def test_a_malformed_model_is_one_clear_error(tmp_path, edit, message):
    doc = json.loads(builtin_model_path().read_text())
    edit(doc)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=message) as err:
        load_model(path)
    assert str(err.value).startswith(str(path))
    assert "train_analyze_model.py" in str(err.value)


@pytest.mark.slow
def test_the_training_script_rebuilds_the_packaged_model(tmp_path):
    out = tmp_path / "model.json"
    run = subprocess.run(
        [sys.executable, "scripts/train_analyze_model.py", "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    rebuilt, packaged = load_model(out), builtin_model()
    assert rebuilt.training == packaged.training
    assert rebuilt.vocabulary == packaged.vocabulary
    assert rebuilt.threshold == packaged.threshold
    assert [v for row in rebuilt.coef for v in row] == pytest.approx(
        [v for row in packaged.coef for v in row], abs=1e-4
    )
    check = subprocess.run(
        [sys.executable, "scripts/train_analyze_model.py", "--check"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_model_fields_of_analysis_json_are_in_its_schema(tmp_path):
    from gatekeeper.contract import schemas
    from gatekeeper.contract.analysis import ANALYSIS_SCHEMA, read_analysis

    d = classify_logs([RULELESS], rules=load_rules())
    doc = d.to_dict()
    schemas.validate(ANALYSIS_SCHEMA, doc, path="analysis.json")
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(doc))
    assert read_analysis(path).category == "gpu_hang_or_timeout"
    with pytest.raises(InputError):
        schemas.validate(ANALYSIS_SCHEMA, {**doc, "decided_by": "oracle"}, path="analysis.json")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ('{"file": "a.log", "category": "segfault"}', "needs string file, category and split"),
        ('{"file": "a.log", "category": "segfault", "split": "dev"}', "is not train or test"),
    ],
)
def test_a_bad_index_line_is_one_clear_error(tmp_path, line, message):
    index = tmp_path / "index.jsonl"
    index.write_text('{"file": "b.log", "category": "segfault", "split": "train"}\n' + line + "\n")
    with pytest.raises(InputError, match=message) as err:
        read_index(index)
    assert str(err.value).startswith(f"{index}:2:")
