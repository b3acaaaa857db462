"""The search (pure) and bisect.json (schema, strict reader, atomic writer)."""

from __future__ import annotations

import json
import math

import pytest

from gatekeeper.bisect.search import first_bad, max_decisions
from gatekeeper.contract.bisect_report import fingerprint, read_bisect, signature_key, write_bisect
from gatekeeper.core.errors import InputError


@pytest.mark.parametrize("n", [2, 3, 5, 16, 17, 40, 64, 100])
def test_clean_ranges_take_at_most_ceil_log2_n_plus_2_decisions(n):
    assert max_decisions(n) == math.ceil(math.log2(n)) + 2
    for culprit in range(1, n):
        asked: list[int] = []
        found = first_bad(0, n - 1, lambda i: asked.append(i) or ("bad" if i >= culprit else "good"))  # noqa: B023
        assert (found.first_bad, found.last_good, found.exact) == (culprit, culprit - 1, True)
        assert len(asked) + 2 <= max_decisions(n)  # the two ends are measured too
        assert len(set(asked)) == len(asked)


def test_skipped_candidates_are_stepped_around_and_named_when_they_hide_the_culprit():
    # 9 cannot be built: the search tries its neighbours and still pins 10
    found = first_bad(0, 19, lambda i: "skip" if i == 9 else ("bad" if i >= 10 else "good"))
    assert (found.last_good, found.first_bad, found.exact) == (8, 10, False)
    assert found.unresolved == (9,)
    found = first_bad(0, 19, lambda i: "skip" if i == 9 else ("bad" if i >= 12 else "good"))
    assert (found.last_good, found.first_bad, found.exact) == (11, 12, True)
    # everything between the ends unknown: the first bad is one of them or the bad end
    found = first_bad(0, 5, lambda i: "unknown")
    assert (found.last_good, found.first_bad, found.unresolved) == (0, 5, (1, 2, 3, 4))
    with pytest.raises(ValueError, match="empty range"):
        first_bad(3, 3, lambda i: "good")


def _doc() -> dict:
    cands = [
        {
            "index": i,
            "ref": f"{i:040x}",
            "label": f"{i:010x}",
            "info": {},
            "state": "measured",
            "unavailable": None,
            "facts": {},
            "rounds": [{"round": 1, "exit_code": int(i >= 2), "outcome": "exited", "duration_s": 0.1}],
            "decisions": [{"reference": None, "decision": "bad" if i >= 2 else "good", "reason": "r", "processes": 1}],
        }
        for i in range(4)
    ]
    return {
        "schema": "gatekeeper.bisect/v1",
        "gatekeeper_version": "0.1.0",
        "status": "done",
        "started_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
        "request": {
            "provider": "git",
            "good": "a",
            "bad": "b",
            "mode": "command",
            "stage": None,
            "stage_args": [],
            "command": ["true"],
            "metric": None,
            "channel": None,
            "gates_file": None,
            "gates_sha256": None,
            "max_processes": 15,
            "timeout_s": 60.0,
            "options": {},
        },
        "candidates": cands,
        "summary": {"candidates": 4, "run": 4, "max_decisions": 4},
        "result": {
            "first_bad": 2,
            "last_good": 1,
            "note": "n",
            "culprits": [{"last_good": 1, "first_bad": 2, "exact": True, "unresolved": [], "changes": {}}],
            "signature": {"metric": "command: true", "channel": None, "fingerprint": "any", "culprit": "git:b"},
        },
    }


def test_bisect_json_round_trips_and_the_reader_is_strict(tmp_path):
    path = write_bisect(tmp_path / "bisect.json", _doc())
    assert read_bisect(path)["result"]["first_bad"] == 2
    assert not list(tmp_path.glob(".bisect.json.*"))  # no temporary file left behind

    def refused(change, match: str) -> None:
        doc = _doc()
        change(doc)
        p = tmp_path / "edited.json"
        p.write_text(json.dumps(doc))
        with pytest.raises(InputError, match=match):
            read_bisect(p)

    refused(lambda d: d.update(schema="gatekeeper.bisect/v2"), "newer gatekeeper")
    refused(lambda d: d.update(status="maybe"), "status")
    refused(lambda d: d["candidates"][1].update(index=7), r"candidates\[1\].index")
    refused(lambda d: d["result"].update(first_bad=9), "names candidate 9 of 4")
    refused(lambda d: d["candidates"][0]["decisions"][0].update(decision="probably"), "decision")
    refused(lambda d: d["request"].update(provider="svn"), "provider")
    # what notify issue reads of a result is in the schema: a signature, and changes of the shapes it renders
    # (without them a schema-valid bisect.json was exit 70 in notify issue: KeyError, AttributeError)
    refused(lambda d: d["result"].pop("signature"), "signature")
    refused(lambda d: d["result"]["culprits"][0].update(changes={"commits": [1]}), r"commits")
    refused(lambda d: d["result"]["culprits"][0].update(changes={"installed": {"torch": "2.5"}}), r"installed")
    bad = _doc()
    bad["result"]["culprits"][0]["unresolved"] = [-1]
    with pytest.raises(InputError, match="names candidate"):
        write_bisect(tmp_path / "never.json", bad)
    assert not (tmp_path / "never.json").exists()


def test_signature_and_fingerprint():
    env = {"device_kind": "rocm", "gfx_arch": "gfx942:sramecc+:xnack-", "rocm_version": "6.2.4"}
    assert fingerprint(env) == "rocm/gfx942/rocm6.2"
    assert fingerprint({"device_kind": "cpu"}) == "cpu/cpu"
    assert fingerprint(None) == "any"
    sig = {
        "metric": "performance_baseline.latency_ms",
        "channel": "nightly",
        "fingerprint": "rocm/gfx942/rocm6.2",
        "culprit": "pip:2.7.0.dev20250305",
    }
    assert signature_key(sig) == signature_key(dict(sig))
    assert signature_key(sig) != signature_key({**sig, "culprit": "pip:2.7.0.dev20250306"})
    assert len(signature_key(sig)) == 16
