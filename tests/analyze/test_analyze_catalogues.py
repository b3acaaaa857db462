"""Signatures checked against the libraries' own message catalogues (issue 15).

Each tests/analyze/catalogues/*.yaml lists messages as a library's source code prints them (NCCL/RCCL,
PyTorch c10d, HIP/ROCr/CUDA runtimes, the amdgpu driver, MIOpen, rocBLAS, Triton, ...), each with the
file it comes from and, rendered with its format placeholders filled in, the category gatekeeper must
give a log whose last error is that message. The catalogues come from source code, not from the
labelled logs, so they test what the signatures know beyond the corpus. A message that is not a
failure by itself (``category: null``) says why; it must stay ``unknown`` when it stands alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gatekeeper.analyze.rules import CATEGORIES, load_rules
from tests.analyze.test_analyze_classify import _classify_text

CATALOGUES = sorted((Path(__file__).parent / "catalogues").glob("*.yaml"))


def _load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), f"{path.name}: not a mapping"
    return doc


def _messages():
    for path in CATALOGUES:
        doc = _load(path)
        for i, msg in enumerate(doc["messages"]):
            yield pytest.param(msg, id=f"{path.stem}[{i}]")


@pytest.fixture(scope="module")
def rules():
    return load_rules()


def test_there_are_catalogues():
    assert CATALOGUES, "tests/analyze/catalogues/ holds no catalogue"


@pytest.mark.parametrize("path", CATALOGUES, ids=lambda p: p.stem)
def test_each_catalogue_names_its_source(path):
    doc = _load(path)
    source = doc.get("source")
    assert isinstance(source, list), f"{path.name}: no source list"
    assert source, f"{path.name}: an empty source list"
    for s in source:
        assert {"repo", "commit"} <= set(s), f"{path.name}: a source without repo and commit: {s}"
        assert len(str(s["commit"])) == 40, f"{path.name}: {s['repo']} commit is not a full sha"
    repos = {s["repo"] for s in source}
    for msg in doc["messages"]:
        assert {"from", "format", "rendered", "category"} <= set(msg), f"{path.name}: incomplete entry {msg}"
        assert msg["from"].split(":", 1)[0] in repos, f"{path.name}: {msg['from']} is not in a listed source"
        # unknown is written null, with why: a category name here is a claim the signatures must meet
        assert msg["category"] is None or msg["category"] in set(CATEGORIES) - {"unknown"}, msg["category"]
        if msg["category"] is None:
            assert msg.get("why"), f"{path.name}: a message left unknown must say why: {msg['format']}"


@pytest.mark.parametrize("msg", list(_messages()))
def test_catalogue_message_is_classified_as_its_category(rules, msg):
    d = _classify_text(rules, msg["rendered"])
    assert d.category == (msg["category"] or "unknown"), (msg["format"], d.known_issue)
