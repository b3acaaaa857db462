from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.gates import Condition, Rule, load_gates


def write(tmp_path, text):
    path = tmp_path / "gates.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(
    ("text", "value", "baseline", "holds"),
    [
        (">= 0.95", 0.95, None, True),
        (">= 95%", 0.949, None, False),
        ("<= 1%", 0.01, None, True),
        ("== 0", 0.0, None, True),
        ("!= 0", 0.0, None, False),
        ("< 1e-4", 5e-5, None, True),
        ("> 10", 10.0, None, False),
        ("<= +20%", 120.0, 100.0, True),
        ("<= +20%", 120.1, 100.0, False),
        (">= -5%", 95.0, 100.0, True),
        (">= -5%", 94.0, 100.0, False),
    ],
)
def test_rule_forms(text, value, baseline, holds):
    assert Rule.parse(text).holds(value, baseline) is holds


def test_relative_rule_needs_baseline_value():
    with pytest.raises(ValueError, match="baseline"):
        Rule.parse("<= +5%").threshold(None)


def test_default_gates_file_loads(repo_root):
    gates = load_gates(repo_root / "gates.yaml")
    names = {g.name for g in gates.gates}
    assert {"operator-coverage", "precision", "checkpoint-restore", "p99-latency", "memory-growth"} <= names
    assert {"throughput-stability", "onnx-export", "multi-device", "sparse-tensors"} <= names


def test_full_syntax_from_the_docs(tmp_path):
    path = write(
        tmp_path,
        """\
        version: 1
        gates:
          operator-coverage:
            metric: functional_test.op_pass_rate
            pass: ">= 0.95"
            warn: ">= 0.90"
            severity: blocking
            on_missing: fail
            mode: enforce
          p99-latency:
            metric: performance_baseline.latency_ms.p99
            compare: baseline
            pass: "<= +20%"
          unit-tests:
            junit: "reports/*.xml"
            metric: pass_rate
            pass: ">= 1.0"
        waivers:
          - gate: operator-coverage
            checks: ["ops.conv.upsample_bilinear2d.*"]
            when: {gfx_arch: gfx90a}
            reason: "upsample_bilinear2d drifts on gfx90a"
            ticket: "https://example.invalid/issues/123"
            owner: "@ml-platform"
            expires: 2027-01-31
        channels:
          nightly:
            p99-latency: {severity: advisory}
        """,
    )
    gates = load_gates(path)
    assert gates.waivers[0].expires == dt.date(2027, 1, 31)
    assert gates.waivers[0].when == Condition({"gfx_arch": ("gfx90a",)})
    nightly = {g.name: g for g in gates.for_channel("nightly")}
    assert nightly["p99-latency"].severity == "advisory"
    assert {g.name: g for g in gates.for_channel("stable")}["p99-latency"].severity == "blocking"
    assert nightly["unit-tests"].junit == "reports/*.xml"


@pytest.mark.parametrize(
    ("body", "where", "fragment"),
    [
        ("gates:\n  a:\n    metric: s.m\n    pass: '95'\n", "5:11", "gates.a.pass"),
        ("gates:\n  a:\n    metric: s.m\n    pass: '>= 1'\n    severty: advisory\n", "6:5", "did you mean 'severity'"),
        ("gates:\n  a:\n    metric: s.m\n    pass: '<= +5%'\n", "5:11", "add compare: baseline"),
        ("gates:\n  a:\n    metric: nodot\n    pass: '>= 1'\n", "4:13", "names no stage"),
        ("gates:\n  a:\n    metric: s.m\n    pass: '>= 1'\n    on_missing: maybe\n", "6:17", "on_missing"),
        (
            "gates:\n  a:\n    metric: s.m\n    pass: '>= 1'\nwaivers:\n  - {gate: b, reason: r, owner: o, expires: 2027-01-01}\n",
            "7:12",
            "no gate named 'b'",
        ),
        (
            "gates:\n  a:\n    metric: s.m\n    pass: '>= 1'\nchannels:\n  nightly:\n    x: {severity: advisory}\n",
            "8:8",
            "no gate",
        ),
    ],
)
def test_errors_name_line_column_and_fix(tmp_path, body, where, fragment):
    path = write(tmp_path, "version: 1\n" + body)
    with pytest.raises(InputError) as err:
        load_gates(path)
    line = err.value.line()
    assert line.startswith(f"{path}:{where}:"), line
    assert fragment in line
    assert "\n" not in line


def test_wrong_version_and_not_a_mapping(tmp_path):
    with pytest.raises(InputError, match="version"):
        load_gates(write(tmp_path, "version: 2\ngates: {a: {metric: s.m, pass: '>= 1'}}\n"))
    with pytest.raises(InputError, match="expected a mapping"):
        load_gates(write(tmp_path, "- just\n- a list\n"))


def test_condition_unmet_explains():
    cond = Condition({"device_kind": ("rocm", "cuda")}, {"GATEKEEPER_REQUIRE_DEVICE": "1"})
    assert "device_kind is rocm or cuda" in cond.unmet({"device_kind": "cpu"}, {})
    assert "GATEKEEPER_REQUIRE_DEVICE=1" in cond.unmet({"device_kind": "rocm"}, {})
    assert cond.unmet({"device_kind": "rocm"}, {"GATEKEEPER_REQUIRE_DEVICE": "1"}) is None
    assert Condition({"gfx_arch": ("gfx90a",)}).unmet({"gfx_arch": "gfx90a:sramecc+:xnack-"}, {}) is None


def test_default_gates_path(tmp_path, repo_root):
    from gatekeeper.evaluate.gates import default_gates_path

    assert default_gates_path("mine.yaml") == __import__("pathlib").Path("mine.yaml")
    shipped = default_gates_path(cwd=tmp_path)  # a model repo without its own gates.yaml
    assert shipped.read_text() == (repo_root / "gates.yaml").read_text()
    assert load_gates(shipped).gates
    (tmp_path / "gates.yaml").write_text("version: 1\ngates: {a: {metric: s.m, pass: '>= 1'}}\n")
    assert default_gates_path(cwd=tmp_path) == tmp_path / "gates.yaml"


def test_evaluate_without_gates_file_uses_the_shipped_defaults(tmp_path, monkeypatch, capsys):
    from gatekeeper import cli
    from gatekeeper.contract.stage_report import write_stage
    from tests.support.builders import report

    monkeypatch.chdir(tmp_path)
    write_stage(report("verify_hip", {"device_available": 1.0}), tmp_path / "artifacts")
    code = cli.main(["evaluate"])
    assert code in (1, 3)  # the other stages' gates follow their missing-data policies
    assert "gates file not found" not in capsys.readouterr().err
