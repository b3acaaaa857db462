from __future__ import annotations

import datetime as dt

import pytest

from gatekeeper.contract.junit import JUnitSummary
from gatekeeper.contract.stage_report import Check
from gatekeeper.contract.verdict import Outcome
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import parse_gates
from tests.support.builders import env, report

TODAY = dt.date(2026, 12, 2)


def gates(gates: dict, **extra):
    return parse_gates({"version": 1, "gates": gates, **extra})


COV = {"metric": "functional_test.op_pass_rate", "pass": ">= 0.95", "warn": ">= 0.90"}


def run(g, reports, **kw):
    return evaluate(
        Inputs(gates=g, reports={r.stage: r for r in reports}, channel=kw.pop("channel", "stable"), today=TODAY, **kw)
    )


def one(verdict):
    assert len(verdict.gates) == 1
    return verdict.gates[0]


def test_pass_warn_fail_tiers_and_exit_codes():
    for value, outcome, result, code in [
        (0.97, Outcome.PASS, "pass", ExitCode.PASS),
        (0.92, Outcome.WARN, "warn", ExitCode.WARN),
        (0.80, Outcome.FAIL, "blocked", ExitCode.BLOCKED),
    ]:
        v = run(gates({"cov": COV}), [report("functional_test", {"op_pass_rate": value})])
        assert one(v).outcome is outcome
        assert (v.result, v.exit_code) == (result, code)
    v = run(gates({"cov": COV}), [report("functional_test", {"op_pass_rate": 0.80})])
    assert "0.8 fails >= 0.95 (nor the warn rule >= 0.90)" in one(v).reason
    assert "cov" in v.summary


def test_missing_data_policies():
    for policy, outcome, result in [
        ("fail", Outcome.FAIL, "blocked"),
        ("warn", Outcome.WARN, "warn"),
        ("skip", Outcome.SKIPPED, "pass"),
    ]:
        g = gates({"cov": {**COV, "on_missing": policy}})
        v = run(g, [report("verify_hip", {"x": 1.0})])
        assert one(v).outcome is outcome
        assert "no functional_test.json" in one(v).reason
        assert f"on_missing: {policy}" in one(v).reason
        assert v.result == result


def test_metric_not_reported_lists_what_exists():
    v = run(gates({"cov": COV}), [report("functional_test", {"other": 1.0})])
    assert "reported no metric 'op_pass_rate'" in one(v).reason
    assert "other" in one(v).reason


def test_advisory_and_shadow_never_block():
    for extra, result in [({"severity": "advisory"}, "warn"), ({"mode": "shadow"}, "pass")]:
        v = run(gates({"cov": {**COV, **extra}}), [report("functional_test", {"op_pass_rate": 0.5})])
        assert one(v).outcome is Outcome.FAIL
        assert not one(v).blocking
        assert v.result == result


def test_baseline_relative_rule_point_values():
    g = gates({"lat": {"metric": "performance_baseline.peak_memory_mb", "compare": "baseline", "pass": "<= +10%"}})
    cand = report("performance_baseline", {"peak_memory_mb": (130.0, "MB", "lower")})
    base = report("performance_baseline", {"peak_memory_mb": (100.0, "MB", "lower")})
    v = run(g, [cand], baselines={"performance_baseline": base})
    r = one(v)
    assert r.outcome is Outcome.FAIL
    assert r.baseline_value == 100.0
    assert abs(r.change - 0.30) < 1e-9
    assert "+30.0% vs baseline 100 MB" in r.reason


def test_no_comparable_baseline_is_said_and_follows_policy():
    g = gates(
        {
            "lat": {
                "metric": "performance_baseline.peak_memory_mb",
                "compare": "baseline",
                "pass": "<= +10%",
                "on_missing": "warn",
            }
        }
    )
    cand = report("performance_baseline", {"peak_memory_mb": (130.0, "MB", "lower")})
    note = "baseline ran on arch gfx90a, this run on gfx942 (a new device or configuration)"
    v = run(g, [cand], baseline_notes={"performance_baseline": note})
    assert one(v).outcome is Outcome.WARN
    assert one(v).reason.startswith("no comparable baseline: baseline ran on arch gfx90a")
    v = run(g, [cand])
    assert "no baseline store was given" in one(v).reason


def test_statistic_of_samples():
    g = gates({"p99": {"metric": "performance_baseline.latency_ms.p99", "pass": "<= 50"}})
    samples = [[10.0] * 98 + [100.0, 100.0]]
    v = run(g, [report("performance_baseline", {"latency_ms": (10.0, "ms", "lower", samples)})])
    assert one(v).outcome is Outcome.FAIL
    assert one(v).unit == "ms"


def test_whole_gate_waiver_active_and_expired():
    waiver = {"gate": "cov", "reason": "known MIOpen drift", "owner": "@ml-platform", "ticket": "T-1"}
    low = [report("functional_test", {"op_pass_rate": 0.5})]
    v = run(gates({"cov": COV}, waivers=[{**waiver, "expires": "2027-01-31"}]), low)
    assert one(v).outcome is Outcome.WAIVED
    assert one(v).waiver["owner"] == "@ml-platform"
    assert v.result == "pass"
    v = run(gates({"cov": COV}, waivers=[{**waiver, "expires": "2026-11-30"}]), low)
    assert one(v).outcome is Outcome.FAIL
    assert "expired on 2026-11-30" in one(v).reason
    assert v.expired_waivers[0]["expires"] == "2026-11-30"
    assert v.result == "blocked"


def test_waiver_when_platform_does_not_match():
    waiver = {"gate": "cov", "reason": "r", "owner": "o", "expires": "2027-01-31", "when": {"gfx_arch": "gfx942"}}
    v = run(gates({"cov": COV}, waivers=[waiver]), [report("functional_test", {"op_pass_rate": 0.5})])
    assert one(v).outcome is Outcome.FAIL


def test_check_level_waivers():
    checks = [Check("ops.conv.upsample_bilinear2d.float16", "failed", "drift"), Check("ops.add", "passed")]
    waiver = {
        "gate": "smoke",
        "checks": ["ops.conv.upsample_bilinear2d.*"],
        "reason": "drift",
        "owner": "o",
        "expires": "2027-01-31",
    }
    g = gates({"smoke": {"metric": "functional_test.checks.failed", "pass": "== 0"}}, waivers=[waiver])
    v = run(g, [report("functional_test", checks=checks)])
    assert one(v).outcome is Outcome.PASS  # the waived check is not counted
    assert [w.check for w in v.waived_checks] == ["ops.conv.upsample_bilinear2d.float16"]
    more = [*checks, Check("ops.index_put_", "error", "boom")]
    v = run(g, [report("functional_test", checks=more)])
    assert one(v).outcome is Outcome.FAIL
    g2 = gates({"cov": COV}, waivers=[{**waiver, "gate": "cov"}])
    v = run(g2, [report("functional_test", {"op_pass_rate": 0.9}, checks=checks)])
    assert one(v).outcome is Outcome.WAIVED
    v = run(g2, [report("functional_test", {"op_pass_rate": 0.9}, checks=more)])
    assert one(v).outcome is Outcome.WARN
    assert "1 failing checks are not waived (e.g. ops.index_put_)" in one(v).reason


def test_channel_overrides():
    g = gates({"cov": COV}, channels={"nightly": {"cov": {"severity": "advisory", "pass": ">= 0.5"}}})
    r = [report("functional_test", {"op_pass_rate": 0.8})]
    assert run(g, r, channel="stable").result == "blocked"
    assert run(g, r, channel="nightly").result == "pass"


def test_when_conditions_skip_with_reason():
    g = gates(
        {
            "dev": {
                "metric": "verify_hip.device_available",
                "pass": ">= 1",
                "when": {"env": {"GATEKEEPER_REQUIRE_DEVICE": "1"}},
            }
        }
    )
    r = [report("verify_hip", {"device_available": 0.0}, environment=env(device_kind="cpu", gfx_arch=None))]
    v = run(g, r)
    assert one(v).outcome is Outcome.SKIPPED
    assert "GATEKEEPER_REQUIRE_DEVICE=1" in one(v).reason
    v = run(g, r, environ={"GATEKEEPER_REQUIRE_DEVICE": "1"})
    assert one(v).outcome is Outcome.FAIL


def test_a_pipeline_condition_is_the_jobs_own_kind_of_pipeline():
    g = gates({"cov": {**COV, "when": {"pipeline": ["tag", "schedule"]}}})
    r = [report("functional_test", {"op_pass_rate": 0.8})]
    assert one(run(g, r, environ={"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_TAG": "v2.1.0"})).outcome is Outcome.FAIL
    assert one(run(g, r, environ={"CI_PIPELINE_SOURCE": "schedule"})).outcome is Outcome.FAIL
    mr = run(g, r, environ={"CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_IID": "7"})
    assert one(mr).outcome is Outcome.SKIPPED
    assert one(mr).reason == "not evaluated: applies only when pipeline is tag or schedule (this run: merge_request)"
    assert "(this run: branch)" in one(run(g, r, environ={"CI_PIPELINE_SOURCE": "push"})).reason
    assert "(this run: local)" in one(run(g, r)).reason
    # an artifact cannot claim the kind of pipeline: only the job's variables say it
    forged = [report("functional_test", {"op_pass_rate": 0.8}, environment=env(extra={"pipeline": "tag"}))]
    assert one(run(g, forged)).outcome is Outcome.SKIPPED
    # a misspelt kind would switch the gate off for good; the error lists the kinds there are
    for kind in ("tags", ["tag", "merge-request"]):
        with pytest.raises(InputError, match=r"pipeline.*is not one of \['tag', 'merge_request', 'schedule'"):
            gates({"cov": {**COV, "when": {"pipeline": kind}}})


def test_junit_gate():
    g = gates({"unit": {"junit": "reports/*.xml", "metric": "pass_rate", "pass": ">= 1.0"}})
    s = JUnitSummary(("reports/a.xml",), tests=10, failures=1, skipped=2, failure_names=("t.x",))
    v = run(g, [], junit={"unit": s})
    assert one(v).outcome is Outcome.FAIL
    assert abs(one(v).value - 7 / 8) < 1e-9
    v = run(g, [], junit={"unit": None})
    assert "no JUnit file matches 'reports/*.xml'" in one(v).reason


def test_stage_not_selected_is_skipped():
    v = run(gates({"cov": COV}), [report("verify_hip", {"x": 1.0})], not_selected=frozenset({"functional_test"}))
    assert one(v).outcome is Outcome.SKIPPED
    assert "not selected" in one(v).reason


def test_verdict_roundtrip():
    from gatekeeper.contract.verdict import Verdict

    v = run(gates({"cov": COV}), [report("functional_test", {"op_pass_rate": 0.92})])
    assert Verdict.from_dict(v.to_dict()) == v


def test_missing_metric_gives_the_skipped_checks_reason():
    checks = [
        Check(
            "memory_growth", "skipped", "memory growth needs at least 600 s of steady running; this run observed 2.1 s"
        )
    ]
    g = gates(
        {
            "mem": {
                "metric": "performance_baseline.memory_growth_mb_per_hour.ci_low",
                "pass": "<= 50",
                "on_missing": "skip",
            }
        }
    )
    v = run(g, [report("performance_baseline", {"x": 1.0}, checks=checks)])
    assert one(v).outcome is Outcome.SKIPPED
    assert "did not measure memory_growth_mb_per_hour.ci_low: memory growth needs at least 600 s" in one(v).reason


def test_a_when_condition_is_judged_on_the_stack_of_its_own_stage():
    """Each stage job may land on another runner: verify_hip on an MI210 (gfx90a), functional_test on an MI300
    (gfx942). A gfx942-only gate (and waiver) of functional_test is decided by functional_test's device, not by
    whichever report comes first; a gate of no one stage (junit:) sees 'different in each stage' and is skipped."""
    mi210 = env(gfx_arch="gfx90a:sramecc+:xnack-")
    mi300 = env(gfx_arch="gfx942:sramecc+:xnack-")
    only = {"when": {"gfx_arch": "gfx942"}}
    g = gates(
        {
            "cov": {**COV, **only},
            "dev": {"metric": "verify_hip.device_available", "pass": ">= 1", **only},
            "unit": {"junit": "reports/*.xml", "metric": "pass_rate", "pass": ">= 1.0", **only},
        },
        waivers=[{"gate": "cov", "reason": "r", "owner": "o", "expires": "2027-01-31", **only}],
    )
    reports = [
        report("verify_hip", {"device_available": 0.0}, environment=mi210),  # first: it decided every gate
        report("functional_test", {"op_pass_rate": 0.5}, environment=mi300),
    ]
    s = JUnitSummary(("reports/a.xml",), tests=10, failures=1)
    by_name = {r.name: r for r in run(g, reports, junit={"unit": s}).gates}
    assert by_name["cov"].outcome is Outcome.WAIVED  # judged (0.5 fails) and waived, both on gfx942
    assert by_name["dev"].outcome is Outcome.SKIPPED
    assert "(this run: gfx90a)" in by_name["dev"].reason
    assert by_name["unit"].outcome is Outcome.SKIPPED
    assert "(this run: different in each stage)" in by_name["unit"].reason
    same = [report("verify_hip", {"device_available": 0.0}, environment=mi300), reports[1]]
    by_name = {r.name: r for r in run(g, same, junit={"unit": s}).gates}
    assert by_name["unit"].outcome is Outcome.FAIL  # one stack in every stage: the junit gate applies
