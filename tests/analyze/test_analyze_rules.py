"""The knowledge base is data: schema validation, one-line errors, overrides, the literal prefilter."""

from __future__ import annotations

import pytest

from gatekeeper.analyze.rules import CATEGORIES, load_rules, required_literals
from gatekeeper.cli import main
from gatekeeper.core.errors import InputError

GOOD = """\
schema: gatekeeper.known_issues/v1
issues:
  - id: our-flaky-allreduce
    category: collective_comm_error
    priority: 99
    patterns: ['allreduce_ring_v2 stalled']
    explanation: Our custom all-reduce stalls on 8-GPU nodes (tracked in INFRA-123).
    remediation: [Use the stock all-reduce on 8-GPU nodes]
    links: [https://example.com/INFRA-123]
    waiver: multi-device
"""


def test_builtin_rules_cover_the_taxonomy_and_use_valid_ids():
    rules = load_rules().rules
    assert {r.category for r in rules} == set(CATEGORIES)
    assert len({r.id for r in rules}) == len(rules)
    assert all(r.remediation and r.explanation for r in rules)


def test_every_builtin_pattern_has_a_prefilter_literal():
    # Without one, the pattern runs on every line and the 500 MB budget is gone.
    missing = [
        (r.id, p.pattern) for r in load_rules().rules for p in r.patterns if required_literals(p.pattern) is None
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        (r"Segmentation fault", (b"segmentation fault",)),
        (r"\bhipErrorNoBinaryForGpu\b", (b"hiperrornobinaryforgpu",)),
        (r"(?i)\b(?:HIP|CUDA)\s+out of memory", (b"out of memory",)),
        (r"(?:NCCL|RCCL) error", (b" error",)),  # the longest required literal wins
        (r"(?:NCCL|RCCL)_x", (b"nccl", b"rccl")),
        (r"(?:foo|ab)\d+", None),
        (r"\d+\s+\w+", None),
    ],
)
def test_required_literals(pattern, literals):
    assert required_literals(pattern) == literals


def test_repo_rules_are_added_with_their_waiver_and_win_by_priority(tmp_path):
    path = tmp_path / "known-issues.yaml"
    path.write_text(GOOD)
    rules = load_rules(path)
    rule = rules.by_id("our-flaky-allreduce")
    assert rule.waiver == "multi-device"
    assert rule.source == str(path)
    assert len(rules.rules) == len(load_rules().rules) + 1


def test_repo_rule_with_a_builtin_id_replaces_it(tmp_path):
    path = tmp_path / "known-issues.yaml"
    path.write_text(GOOD.replace("our-flaky-allreduce", "segmentation-fault"))
    rules = load_rules(path)
    assert rules.by_id("segmentation-fault").category == "collective_comm_error"
    assert len(rules.rules) == len(load_rules().rules)


@pytest.mark.parametrize(
    ("edit", "where", "message"),
    [
        (("category: collective_comm_error", "category: colective"), ":4:15:", "issues[0].category"),
        (("priority: 99", "priority: high"), ":5:15:", "issues[0].priority"),
        (("    waiver: multi-device", "    waiver: multi-device\n    severity: high"), ":3:5:", "severity"),
        (("['allreduce_ring_v2 stalled']", "['allreduce(ring']"), ":6:16:", "invalid regular expression"),
        # the classic YAML trap: an unquoted ": " makes a mapping
        (("[Use the stock", "[Use: the stock"), ":8:19:", "is not of type 'string'"),
        (("['allreduce_ring_v2 stalled']", "['allreduce_ring_v2 stalled]"), ":", "invalid YAML"),
    ],
)
def test_bad_known_issues_file_is_one_line_with_line_and_column(tmp_path, capsys, edit, where, message):
    path = tmp_path / "known-issues.yaml"
    path.write_text(GOOD.replace(*edit))
    log = tmp_path / "job.log"
    log.write_text("ok\n")
    with pytest.raises(InputError) as err:
        load_rules(path)
    assert message in str(err.value)
    assert f"{path}{where}" in str(err.value)
    assert main(["analyze", str(log), "--known-issues", str(path)]) == 2
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert len(err_lines) == 1
    assert err_lines[0].startswith(f"gatekeeper: {path}:")


def test_duplicate_ids_are_rejected(tmp_path):
    path = tmp_path / "known-issues.yaml"
    body = GOOD.split("issues:\n")[1]
    path.write_text("issues:\n" + body + body)
    with pytest.raises(InputError, match="duplicate id 'our-flaky-allreduce'"):
        load_rules(path)


def test_all_required_literals_are_checked_before_the_regex():
    from gatekeeper.analyze.rules import all_required_literals

    pattern = r"(?i)\b(?:loss|norm)\b\W{0,12}(?:nan|inf)\b"
    assert all_required_literals(pattern) == ((b"loss", b"norm"), (b"inf", b"nan"))
    assert all_required_literals(r"MIOpen Error: .* failed") == ((b"miopen error: ",), (b" failed",))
