"""Principle 8: ``analyze`` holds memory bounded by bytes across all inputs, whatever the number of logs and
the length of their lines.

Before: each input kept up to 40 pieces of about 8 MB as its tail (a log without a newline is cut into such
pieces), so four 24 MiB logs without a newline peaked at 174 MiB here, against 48 MiB for a tiny log. Now a
kept tail line is at most ``MAX_KEPT_LINE`` bytes and the tails of all inputs together ``MAX_KEPT_BYTES``;
what moves through is one chunk (a line without a newline is cut at four chunks) and its copies. The
bound below is a memory bound measured by the child's own peak resident size, not a timing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gatekeeper.analyze.classify import _CUT, MAX_KEPT_LINE, MAX_MATCH, Classifier
from gatekeeper.analyze.rules import load_rules
from gatekeeper.core import proc

REPO = Path(__file__).resolve().parents[2]
# One analysis beyond its own start: a 2 MiB chunk cut at a newline, or a line without one cut at four chunks
# (8 MiB) plus the chunk being read; its lowercase copy, its decoded line and the cleaned copy of that line.
# Measured: 26 MiB for the four logs below. The bound does not grow with the number of logs.
BOUND_MIB = 48

_CHILD = """
import resource, sys
from gatekeeper.cli import main
code = main(["analyze", *sys.argv[2:], "--format", "json", "--out", sys.argv[1]])
print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_mib(tmp: Path, logs: list[Path]) -> float:
    res = proc.run([sys.executable, "-c", _CHILD, str(tmp / "out.json"), *map(str, logs)], timeout=600, cwd=REPO)
    assert res.ok, res.describe() + res.stderr[-2000:]
    code, kib = res.stdout.split()[-2:]
    assert code == "0"
    return int(kib) / 1024  # ru_maxrss is in KiB on Linux


@pytest.mark.slow
def test_memory_is_bounded_by_bytes_whatever_the_logs(tmp_path):
    tiny = tmp_path / "tiny.log"
    tiny.write_text("step 1\nRuntimeError: boom\n")
    logs = []
    for i in range(4):
        log = tmp_path / f"no-newline-{i}.log"
        with log.open("wb") as fh:
            for _ in range(24):
                fh.write(b"x" * 2**20)
        logs.append(log)
    base = _peak_mib(tmp_path, [tiny])
    peak = _peak_mib(tmp_path, logs)
    assert peak - base <= BOUND_MIB, (
        f"analyze of four 24 MiB logs without a newline: {peak:.0f} MiB, a tiny log {base:.0f}"
    )


def test_a_kept_line_is_cut_to_its_ends():
    classifier = Classifier(load_rules(None))
    head, tail = b"A" * 3000, b"Z" * 3000
    classifier.scan_text((head + b"middle" + tail).decode() + "\nlast line\n", "one.log")
    kept = classifier.evidence.tails["one.log"]
    assert kept[-1] == "last line"
    assert kept[-2] == "A" * MAX_MATCH + _CUT.decode() + "Z" * MAX_MATCH
    assert len(kept[-2]) <= MAX_KEPT_LINE + len(_CUT)


def test_the_tails_of_all_logs_together_stay_within_the_budget():
    budget = 64 * 2**10
    classifier = Classifier(load_rules(None), max_kept_bytes=budget)
    for i in range(200):  # 200 logs of 40 long lines: 16 MB of tails before, whatever the budget
        classifier.scan_text("\n".join(f"{i} " + "y" * 5000 for _ in range(40)) + "\n", f"log{i}.log")
    ev = classifier.evidence
    kept = sum(len(line) for tail in ev.tails.values() for line in tail)
    assert kept <= budget
    assert ev.dropped_sources == 200 - len(ev.tails)
    assert "log199.log" in ev.tails  # the newest are kept, the oldest go first
    assert "log0.log" not in ev.tails


def test_the_diagnosis_says_when_tails_were_left_out():
    from gatekeeper.analyze.diagnosis import diagnose

    rules = load_rules(None)
    classifier = Classifier(rules, max_kept_bytes=4096)
    for i in range(5):
        classifier.scan_text("z" * 3000 + "\n", f"log{i}.log")
    diagnosis = diagnose(classifier.evidence, rules, model=None)
    assert any("earlier logs are left out" in line for line in diagnosis.excerpt)
