"""gates.yaml parsing, rules, conditions, waivers and channel overrides, exactly (written against surviving
mutants: a changed error place, message, default or field in gatekeeper.evaluate.gates must fail a test)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.gates import Condition, Rule, Waiver, default_gates_path, load_gates, parse_gates

G = {"metric": "s.m", "pass": ">= 1"}


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        ([1], "g.yaml:1:1: expected a mapping with version: 1 and gates:; hint: see gates.yaml in the docs"),
        (
            {"version": 1, "gates": {"a": {"metric": "nostage", "pass": ">= 1"}}},
            "g.yaml:gates.a.metric: gates.a.metric: 'nostage' names no stage; "
            "hint: write stage.metric, e.g. functional_test.op_pass_rate",
        ),
        (
            {"version": 1, "gates": {"a": {"metric": "bogus", "junit": "x.xml", "pass": ">= 1"}}},
            "g.yaml:gates.a.metric: gates.a.metric: 'bogus' is not a JUnit metric; "
            "hint: use one of pass_rate, failures, errors, tests, skipped",
        ),
        (
            {"version": 1, "gates": {"a": {"metric": "s.m", "pass": ">= 1", "warn": "<= +5%"}}},
            "g.yaml:gates.a.warn: gates.a.warn: '<= +5%' is relative to a baseline; "
            "hint: add compare: baseline, or drop the sign for an absolute threshold",
        ),
        (
            {
                "version": 1,
                "gates": {"alpha": G},
                "waivers": [{"gate": "alpah", "reason": "r", "owner": "o", "expires": "2026-01-01"}],
            },
            "g.yaml:waivers.0.gate: waivers[0].gate: no gate named 'alpah'; hint: did you mean 'alpha'?",
        ),
        (
            {
                "version": 1,
                "gates": {"a": G, "b": G},
                "waivers": [{"gate": "zzz", "reason": "r", "owner": "o", "expires": "2026-01-01"}],
            },
            "g.yaml:waivers.0.gate: waivers[0].gate: no gate named 'zzz'; hint: allowed: a, b",
        ),
        (
            {
                "version": 1,
                "gates": {"a": G},
                "waivers": [{"gate": "a", "reason": "r", "owner": "o", "expires": "2026-13-01"}],
            },
            "g.yaml:waivers.0.expires: waivers[0].expires: '2026-13-01' is not a date; hint: write YYYY-MM-DD",
        ),
        (
            {"version": 1, "gates": {"a": G}, "channels": {"nightly": {"b": {"severity": "advisory"}}}},
            "g.yaml:channels.nightly.b: channels.nightly: no gate named 'b'; hint: allowed: a",
        ),
        (
            {"version": 1, "gates": {"a": G}, "channels": {"nightly": {"a": {"warn": "<= +5%"}}}},
            "g.yaml:channels.nightly.a.warn: channels.nightly.a.warn: a relative rule needs a baseline; "
            "hint: add compare: baseline to gates.a",
        ),
        (
            {"version": 1, "gates": {"a": {**G, "pss": 1}}},
            "g.yaml:gates.a.pss: gates.a: unknown key 'pss'; hint: did you mean 'pass'?",
        ),
    ],
)
def test_parse_errors_exactly(doc, line):
    with pytest.raises(InputError) as err:
        parse_gates(doc, path="g.yaml")
    assert err.value.line() == line


def test_errors_from_a_file_give_line_and_column(tmp_path: Path):
    path = tmp_path / "g.yaml"
    path.write_text('version: 1\ngates:\n  a:\n    metric: nostage\n    pass: ">= 1"\n')
    with pytest.raises(InputError) as err:
        load_gates(path)
    assert err.value.line().startswith(f"{path}:4:13: gates.a.metric: 'nostage' names no stage")
    path.write_text("")
    with pytest.raises(InputError, match=r"empty|expected a mapping"):
        load_gates(path)


def test_every_field_is_read():
    gates = parse_gates(
        {
            "version": 1,
            "gates": {
                "a": {
                    "metric": "s.m",
                    "pass": "<= +5%",
                    "warn": "<= +10%",
                    "compare": "baseline",
                    "severity": "advisory",
                    "on_missing": "skip",
                    "mode": "shadow",
                    "alpha": 0.05,
                    "min_effect": 0.04,
                    "description": "d",
                    "max_skipped": 2,
                    "skip_checks": ["x.*"],
                    "when": {"device_kind": "rocm", "env": {"X": "1"}},
                },
                "b": {"metric": "pass_rate", "junit": "r/*.xml", "pass": ">= 1"},
            },
        }
    )
    a, b = gates.gates
    assert (a.severity, a.on_missing, a.mode, a.compare, a.alpha, a.min_effect, a.description) == (
        "advisory", "skip", "shadow", "baseline", 0.05, 0.04, "d",
    )  # fmt: skip
    assert (a.max_skipped, a.skip_checks, a.warn_rule.text, a.stage) == (2, ("x.*",), "<= +10%", "s")
    assert a.when == Condition({"device_kind": ("rocm",)}, {"X": "1"})
    assert (b.junit, b.stage, b.alpha, b.min_effect, b.description, b.max_skipped, b.skip_checks) == (
        "r/*.xml", None, 0.01, None, "", None, (),
    )  # fmt: skip
    assert (b.severity, b.on_missing, b.mode, b.compare, b.warn_rule) == ("blocking", "fail", "enforce", None, None)
    assert gates.source == "gates.yaml"


def test_channel_overrides_every_field():
    gates = parse_gates(
        {
            "version": 1,
            "gates": {"a": {"metric": "s.m", "pass": ">= 1", "warn": ">= 0.5"}, "b": G},
            "channels": {
                "nightly": {
                    "a": {
                        "pass": ">= 2",
                        "warn": ">= 0.9",
                        "on_missing": "warn",
                        "mode": "shadow",
                        "severity": "advisory",
                    }
                }
            },
        }
    )
    a, b = gates.for_channel("nightly")
    assert (a.pass_rule.text, a.warn_rule.text, a.on_missing, a.mode, a.severity) == (
        ">= 2", ">= 0.9", "warn", "shadow", "advisory",
    )  # fmt: skip
    assert b == gates.gates[1]
    assert gates.for_channel("stable") == gates.gates


@pytest.mark.parametrize(
    ("text", "baseline", "threshold"),
    [
        ("<= +20%", 10.0, 12.0),
        ("<= +20%", -10.0, -8.0),
        ("<= +20%", 0.0, 0.0),
        (">= -5%", 100.0, 95.0),
        ("<= 3", None, 3.0),
    ],
)
def test_rule_thresholds(text, baseline, threshold):
    assert Rule.parse(text).threshold(baseline) == pytest.approx(threshold)


def test_relative_rule_without_baseline_and_describe():
    with pytest.raises(ValueError, match=r"^a relative rule needs a baseline value$"):
        Rule.parse("<= +20%").threshold(None)
    assert Rule.parse("<= +20%").describe(10.0) == "<= 12 (<= +20% vs baseline 10)"
    assert Rule.parse("<= +20%").describe() == "<= +20%"
    assert Rule.parse("<= 3").describe(10.0) == "<= 3"
    with pytest.raises(ValueError, match="not a rule"):
        Rule.parse("about 3")


def test_conditions_exactly():
    c = Condition.from_dict({"gfx_arch": ["gfx90a", "gfx942"], "env": {"E": "1"}})
    assert c.unmet({"gfx_arch": "gfx90a:sramecc+:xnack-"}, {"E": "1"}) is None
    assert (
        c.unmet({"gfx_arch": None}, {"E": "1"}) == "applies only when gfx_arch is gfx90a or gfx942 (this run: unknown)"
    )
    assert c.unmet({"gfx_arch": "gfx942"}, {}) == "applies only when E=1 (it is 'unset')"
    assert c.unmet({"gfx_arch": "gfx942"}, {"E": "2"}) == "applies only when E=1 (it is '2')"
    d = Condition.from_dict({"device_kind": "cpu:x"})
    assert d.unmet({"device_kind": "cpu:x"}, {}) is None  # only gfx_arch loses its feature suffixes
    assert not Condition.from_dict(None)
    assert not Condition.from_dict({})
    assert Condition.from_dict({"env": {"A": "1"}})


def test_a_waiver_applies_through_its_expiry_day():
    w = Waiver("a", "r", "o", dt.date(2026, 12, 1))
    assert not w.expired(dt.date(2026, 12, 1))
    assert w.expired(dt.date(2026, 12, 2))
    assert Waiver("a", "r", "o", dt.date(2026, 12, 1), ("x",), ticket="T-1").to_dict() == {
        "gate": "a", "reason": "r", "owner": "o", "ticket": "T-1", "expires": "2026-12-01", "checks": ["x"],
    }  # fmt: skip


def test_default_gates_path(tmp_path: Path, monkeypatch):
    assert default_gates_path("x.yaml") == Path("x.yaml")
    assert default_gates_path(cwd=tmp_path).name == "default_gates.yaml"
    (tmp_path / "gates.yaml").write_text("version: 1\n")
    assert default_gates_path(cwd=tmp_path) == tmp_path / "gates.yaml"
    monkeypatch.chdir(tmp_path)
    assert default_gates_path() == Path("gates.yaml")
