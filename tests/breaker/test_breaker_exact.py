"""The breaker's transitions, state file and messages, exactly (written against surviving mutants: a changed
field, boundary or message in gatekeeper.breaker.state must fail a test)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from gatekeeper.breaker import state as breaker
from gatekeeper.breaker.policy import PolicyDecision, static_policy
from gatekeeper.breaker.state import (
    BreakerConfig,
    BreakerState,
    Decision,
    check,
    parse_duration,
    record,
    reset,
    state_dir,
    status,
)
from gatekeeper.core.errors import InputError
from tests.breaker.test_breaker import CFG, Clock

AT0 = "2026-12-01T12:00:00+00:00"


def test_open_probe_close_reset_exactly(tmp_path: Path) -> None:
    clock = Clock()
    for i in range(3):
        st = record(tmp_path, "nightly", "verify_hip", CFG, passed=False, diagnosis=f"d{i}", job_url="u", now=clock)
        if i < 2:
            clock.advance(60)
    assert st.to_dict() == {
        "schema": "gatekeeper.breaker/v1",
        "channel": "nightly",
        "job": "verify_hip",
        "state": "open",
        "consecutive_failures": 3,
        "opened_at": "2026-12-01T12:02:00+00:00",
        "probe_started_at": None,
        "last_failure_at": "2026-12-01T12:02:00+00:00",
        "last_diagnosis": "d2",
        "last_job_url": "u",
        "history": [
            {"at": AT0, "event": "fail", "detail": "d0"},
            {"at": "2026-12-01T12:01:00+00:00", "event": "fail", "detail": "d1"},
            {"at": "2026-12-01T12:02:00+00:00", "event": "opened", "detail": "3 consecutive failure(s)"},
        ],
    }
    assert json.loads((tmp_path / "nightly--verify_hip.json").read_text()) == st.to_dict()
    clock.advance(3600 - 1)
    closed = check(tmp_path, "nightly", "verify_hip", CFG, now=clock)
    assert closed == Decision(
        False,
        False,
        st,
        "breaker open since 2026-12-01T12:02:00+00:00 for nightly/verify_hip after 3 consecutive failure(s), "
        "last diagnosis: d2 (u); cool-down ends 2026-12-01T13:02:00+00:00; skipped without using the device. "
        "Reset: gatekeeper breaker reset --channel nightly --job verify_hip --by NAME --reason WHY",
    )
    clock.advance(1)  # exactly the cool-down: this run is the probe
    probe = check(tmp_path, "nightly", "verify_hip", CFG, now=clock)
    assert (probe.allowed, probe.probe) == (True, True)
    assert probe.message == "breaker half-open for nightly/verify_hip: this run is the probe that decides"
    assert probe.state.state == "half_open"
    assert probe.state.probe_started_at == "2026-12-01T13:02:00+00:00"
    assert probe.state.history[-1] == {
        "at": "2026-12-01T13:02:00+00:00",
        "event": "probe",
        "detail": "cool-down passed; this run decides",
    }
    running = check(tmp_path, "nightly", "verify_hip", CFG, now=clock)
    assert (running.allowed, running.probe) == (False, False)
    assert "; a probe run is in progress; skipped" in running.message
    clock.advance(10)
    st = record(tmp_path, "nightly", "verify_hip", CFG, passed=True, job_url="u2", now=clock)
    assert (st.state, st.consecutive_failures, st.opened_at, st.probe_started_at) == ("closed", 0, None, None)
    assert st.history[-1] == {"at": "2026-12-01T13:02:10+00:00", "event": "closed", "detail": "u2"}
    st = record(tmp_path, "nightly", "verify_hip", CFG, passed=True, now=clock)
    assert st.history[-1] == {"at": "2026-12-01T13:02:10+00:00", "event": "pass", "detail": ""}
    ok = check(tmp_path, "nightly", "verify_hip", CFG, now=clock)
    assert ok == Decision(
        True, False, st, "breaker closed for nightly/verify_hip (0 consecutive failure(s) of 3 allowed)"
    )


def test_a_stale_probe_lets_the_next_run_probe_at_exactly_the_cooldown(tmp_path: Path) -> None:
    clock = Clock()
    cfg = BreakerConfig(failures=1, cooldown_s=100)
    record(tmp_path, "stable", "gate", cfg, passed=False, now=clock)
    clock.advance(100)
    assert check(tmp_path, "stable", "gate", cfg, now=clock).probe
    clock.advance(99)
    assert not check(tmp_path, "stable", "gate", cfg, now=clock).allowed
    clock.advance(1)
    assert check(tmp_path, "stable", "gate", cfg, now=clock).probe


def test_a_failed_probe_reopens_with_a_fresh_cooldown(tmp_path: Path) -> None:
    clock = Clock()
    cfg = BreakerConfig(failures=2, cooldown_s=100)
    for _ in range(2):
        record(tmp_path, "stable", "gate", cfg, passed=False, now=clock)
    clock.advance(100)
    assert check(tmp_path, "stable", "gate", cfg, now=clock).probe
    clock.advance(5)
    st = record(tmp_path, "stable", "gate", cfg, passed=False, diagnosis=None, now=clock)
    assert (st.state, st.opened_at, st.probe_started_at, st.consecutive_failures) == (
        "open",
        "2026-12-01T12:01:45+00:00",
        None,
        3,
    )
    assert st.last_diagnosis is None
    assert st.history[-1] == {
        "at": "2026-12-01T12:01:45+00:00",
        "event": "opened",
        "detail": "3 consecutive failure(s)",
    }


def test_no_url_no_diagnosis_in_the_open_message(tmp_path: Path) -> None:
    cfg = BreakerConfig(failures=1, cooldown_s=10)
    record(tmp_path, "stable", "gate", cfg, passed=False, now=Clock())
    msg = check(tmp_path, "stable", "gate", cfg, now=Clock()).message
    assert "last diagnosis: none recorded; cool-down ends" in msg


def test_reset_exactly(tmp_path: Path) -> None:
    clock = Clock()
    cfg = BreakerConfig(failures=1, cooldown_s=10)
    record(tmp_path, "stable", "gate", cfg, passed=False, diagnosis="x", now=clock)
    st = reset(tmp_path, "stable", "gate", by="alice", reason="fixed", now=clock)
    assert (st.channel, st.job, st.state, st.consecutive_failures, st.opened_at, st.probe_started_at) == (
        "stable",
        "gate",
        "closed",
        0,
        None,
        None,
    )
    assert st.history[-1] == {"at": AT0, "event": "reset", "by": "alice", "reason": "fixed"}
    assert breaker.status(tmp_path) == [st]
    with pytest.raises(InputError) as err:
        reset(tmp_path, "stable", "gate", by=" ", reason="x")
    assert err.value.line() == (
        "<input>:--by/--reason: a reset needs who and why; hint: e.g. --by alice --reason 'driver fixed'"
    )
    with pytest.raises(InputError):
        reset(tmp_path, "stable", "gate", by="bob", reason=" ")


@pytest.mark.parametrize(
    ("kwargs", "line"),
    [
        ({"failures": 0}, "<input>:--failures: must be at least 1 (got 0); hint: e.g. --failures 3"),
        ({"cooldown_s": -1.0}, "<input>:--cooldown: must not be negative (got -1.0); hint: e.g. 24h"),
    ],
)
def test_config_errors_exactly(kwargs, line) -> None:
    with pytest.raises(InputError) as err:
        BreakerConfig(**kwargs)
    assert err.value.line() == line


def test_config_edges_are_allowed() -> None:
    assert BreakerConfig(failures=1, cooldown_s=0).cooldown_s == 0


def test_names_exactly(tmp_path: Path) -> None:
    for channel, job, what in (("", "gate", "--channel"), ("stable", "///", "--job")):
        with pytest.raises(InputError) as err:
            check(tmp_path, channel, job, CFG)
        got = repr(job if what == "--job" else channel)
        assert err.value.line() == f"<input>:{what}: must be a non-empty name (got {got}); hint: e.g. --channel nightly"
    record(tmp_path, "st/able", "a b", CFG, passed=True)
    assert (tmp_path / "st_able--a_b.json").is_file()


def test_a_foreign_state_file_is_an_input_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "stable--gate.json"
    path.write_text('{"schema": "other/v1"}')
    with pytest.raises(InputError) as err:
        check(tmp_path, "stable", "gate", CFG)
    assert err.value.line() == (
        f"{path}:schema: not a gatekeeper.breaker/v1 state file; hint: delete it or run 'gatekeeper breaker reset'"
    )
    path.write_text("[1]")
    with pytest.raises(InputError, match=r"not a gatekeeper\.breaker/v1 state file"):
        check(tmp_path, "stable", "gate", CFG)
    path.write_text("")
    with pytest.raises(InputError, match="empty breaker state"):
        check(tmp_path, "stable", "gate", CFG)


def test_status_lists_only_state_files(tmp_path: Path) -> None:
    assert status(tmp_path / "none") == []
    record(tmp_path, "stable", "gate", CFG, passed=True)
    (tmp_path / "x--y.json").write_text('{"schema": "other/v1"}')
    (tmp_path / "notes.json").write_text("{}")
    assert [s.job for s in status(tmp_path)] == ["gate"]
    back = BreakerState.from_dict({**status(tmp_path)[0].to_dict(), "unknown": 1})
    assert back == status(tmp_path)[0]
    assert isinstance(back.history, tuple)


def test_state_dir_precedence(tmp_path: Path) -> None:
    assert state_dir(tmp_path / "x", {"GATEKEEPER_BREAKER_DIR": "/elsewhere"}) == tmp_path / "x"
    assert state_dir(None, {"GATEKEEPER_BREAKER_DIR": str(tmp_path)}) == tmp_path


def test_clock_is_utc() -> None:
    before = dt.datetime.now(dt.timezone.utc)
    now = breaker._utc_now()
    after = dt.datetime.now(dt.timezone.utc)
    assert now.tzinfo is not None
    assert now.utcoffset() == dt.timedelta(0)
    assert before <= now <= after  # read between two readings of the clock, however slow the machine


@pytest.mark.parametrize(("text", "seconds"), [("2d", 172800.0), ("1.5h", 5400.0), (" 7 ", 7.0), ("3m", 180.0)])
def test_durations(text, seconds) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "3w", "-1h", "1h30m"])
def test_bad_durations_exactly(text) -> None:
    with pytest.raises(InputError) as err:
        parse_duration(text)
    assert err.value.line() == f"<input>:--cooldown: not a duration: {text!r}; hint: use e.g. 24h, 90m, 30s or 2d"


MAIN = "main"


@pytest.mark.parametrize(
    ("env", "channel", "want"),
    [
        (
            {"CI_COMMIT_TAG": "v1", "CI_PIPELINE_SOURCE": "push"},
            "stable",
            PolicyDecision(True, False, "policy: stable channel allowed (tag v1); failures block", True),
        ),
        (
            {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_REF_NAME": "main"},
            "stable",
            PolicyDecision(True, False, "policy: stable channel allowed (push on main); failures block", True),
        ),
        (
            {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_REF_NAME": "dev"},
            "nightly",
            PolicyDecision(True, False, "policy: nightly channel allowed (push on dev); failures block", False),
        ),
        ({}, "stable", PolicyDecision(True, False, "policy: stable channel allowed (pipeline on ?); failures block")),
        (
            {"CI_COMMIT_REF_NAME": "main"},
            "stable",
            PolicyDecision(True, False, "policy: stable channel allowed (pipeline on main); failures block"),
        ),
        (
            {"CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "dev"},
            "stable",
            PolicyDecision(True, True, "policy: merge request into 'dev' (not 'main'): failures do not block"),
        ),
        (
            {"CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main"},
            "stable",
            PolicyDecision(
                True, False, "policy: stable channel allowed (merge_request_event on ?); failures block", True
            ),
        ),
        (
            {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_REF_NAME": "trunk", "CI_DEFAULT_BRANCH": "trunk"},
            "stable",
            PolicyDecision(True, False, "policy: stable channel allowed (push on trunk); failures block", True),
        ),
        (
            {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_REF_NAME": "rel", "GATEKEEPER_PROTECTED_BRANCH": "rel"},
            "stable",
            PolicyDecision(True, False, "policy: stable channel allowed (push on rel); failures block", True),
        ),
    ],
)
def test_static_policy_exactly(env, channel, want) -> None:
    got = static_policy(env, channel)
    assert got == want
    assert got.allowed is want.allowed
    assert got.may_fail is want.may_fail
    assert got.protected is want.protected


def test_nightly_on_a_tag_exactly() -> None:
    got = static_policy({"CI_COMMIT_TAG": "v2"}, "nightly")
    assert got.allowed is False
    assert got.may_fail is False
    assert got.message == (
        "policy: the nightly channel never runs on tag pipelines (tag 'v2'); a release is validated on the "
        "stable channel only. Restore the template's 'if: $CHANNEL == \"nightly\" && $CI_COMMIT_TAG' rule "
        "(when: never)"
    )
    assert static_policy({"CI_COMMIT_TAG": "v2"}, "nightly", protected_branch="x").allowed is False


def test_explicit_protected_branch_wins() -> None:
    env = {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_REF_NAME": "rel", "GATEKEEPER_PROTECTED_BRANCH": "main"}
    assert static_policy(env, "stable", protected_branch="rel").protected is True
    assert static_policy(env, "stable").protected is False
