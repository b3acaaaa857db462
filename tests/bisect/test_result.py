"""bisect.json's result: each culprit's symptom and what-changed error are bounded; the symptom is the first
bad candidate's decision against that search's reference."""

from __future__ import annotations

from typing import Any

from gatekeeper.bisect.providers import Candidate
from gatekeeper.bisect.result import culprits
from gatekeeper.bisect.search import Found


class _Failing:
    """A provider whose what-changed fails with a message from the code under test (as long as it likes)."""

    def changes(self, *_args: Any) -> dict[str, Any]:
        raise RuntimeError("x" * 5000)


def test_a_culprits_symptom_and_a_failed_what_changed_are_bounded() -> None:
    cands = [Candidate(i, f"{i:040x}", f"c{i}") for i in range(4)]
    long_reason = "latency-median: +25% " + "y" * 5000
    entries: list[dict[str, Any]] = [{"index": i, "facts": {}, "decisions": []} for i in range(4)]
    entries[2]["decisions"] = [
        {"reference": 1, "reason": "against another reference"},
        {"reference": 0, "reason": long_reason},
    ]
    (culprit,) = culprits([Found(1, 2)], cands=cands, entries=entries, provider=_Failing())  # type: ignore[arg-type]
    assert culprit["symptom"] == long_reason[:600]  # the decision against reference 0, cut at 600 characters
    assert culprit["changes"]["error"].startswith("RuntimeError: xxx")
    assert len(culprit["changes"]["error"]) == 300
    assert (culprit["first_bad"], culprit["last_good"], culprit["exact"], culprit["reference"]) == (2, 1, True, 0)
