from __future__ import annotations

import datetime as dt
import json
import multiprocessing
from pathlib import Path

import pytest

from gatekeeper.breaker import state as breaker
from gatekeeper.breaker.policy import static_policy
from gatekeeper.breaker.state import BreakerConfig, check, parse_duration, record, reset, status
from gatekeeper.cli import main
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
CFG = BreakerConfig(failures=3, cooldown_s=3600)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


# ---------------------------------------------------------------- static policy


def test_nightly_never_on_a_tag() -> None:
    d = static_policy({"CI_COMMIT_TAG": "v1.2.0", "CI_PIPELINE_SOURCE": "push"}, "nightly")
    assert not d.allowed
    assert "never runs on tag pipelines" in d.message
    assert "v1.2.0" in d.message
    assert static_policy({"CI_COMMIT_TAG": "v1.2.0"}, "stable").allowed


@pytest.mark.parametrize(
    ("env", "may_fail"),
    [
        ({"CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "dev"}, True),
        ({"CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main"}, False),
        ({"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_REF_NAME": "main"}, False),
        ({"CI_PIPELINE_SOURCE": "schedule", "CI_COMMIT_REF_NAME": "main"}, False),
        (
            {
                "CI_PIPELINE_SOURCE": "merge_request_event",
                "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "release",
                "GATEKEEPER_PROTECTED_BRANCH": "release",
            },
            False,
        ),
        (
            {
                "CI_PIPELINE_SOURCE": "merge_request_event",
                "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
                "CI_DEFAULT_BRANCH": "trunk",
            },
            True,
        ),
    ],
)
def test_merge_requests_into_unprotected_branches_may_fail(env: dict[str, str], may_fail: bool) -> None:
    d = static_policy(env, "stable")
    assert d.allowed
    assert d.may_fail is may_fail


# ---------------------------------------------------------------- state machine


def test_opens_after_n_consecutive_failures_and_short_circuits(tmp_path: Path) -> None:
    clock = Clock()
    for i in range(2):
        st = record(tmp_path, "nightly", "functional_test", CFG, passed=False, diagnosis=f"d{i}", now=clock)
        assert st.state == "closed"
        assert check(tmp_path, "nightly", "functional_test", CFG, now=clock).allowed
    st = record(tmp_path, "nightly", "functional_test", CFG, passed=False, diagnosis="miopen_error: db", now=clock)
    assert st.state == "open"
    d = check(tmp_path, "nightly", "functional_test", CFG, now=clock)
    assert not d.allowed
    assert f"breaker open since {T0.isoformat(timespec='seconds')}" in d.message
    assert "last diagnosis: miopen_error: db" in d.message
    # other channels and jobs are independent
    assert check(tmp_path, "stable", "functional_test", CFG, now=clock).allowed
    assert check(tmp_path, "nightly", "verify_hip", CFG, now=clock).allowed


def test_a_pass_resets_the_count(tmp_path: Path) -> None:
    clock = Clock()
    for passed in (False, False, True, False, False):
        st = record(tmp_path, "stable", "gate", CFG, passed=passed, now=clock)
    assert st.state == "closed"
    assert st.consecutive_failures == 2


def _open(tmp_path: Path, clock: Clock) -> None:
    for _ in range(3):
        record(tmp_path, "nightly", "perf", CFG, passed=False, diagnosis="boom", now=clock)


def test_half_open_after_cooldown_one_probe_decides_fail(tmp_path: Path) -> None:
    clock = Clock()
    _open(tmp_path, clock)
    clock.advance(3599)
    assert not check(tmp_path, "nightly", "perf", CFG, now=clock).allowed
    clock.advance(2)
    probe = check(tmp_path, "nightly", "perf", CFG, now=clock)
    assert probe.allowed
    assert probe.probe
    assert probe.state.state == "half_open"
    # while the probe runs, nobody else goes
    other = check(tmp_path, "nightly", "perf", CFG, now=clock)
    assert not other.allowed
    assert "probe run is in progress" in other.message
    st = record(tmp_path, "nightly", "perf", CFG, passed=False, diagnosis="still broken", now=clock)
    assert st.state == "open"
    assert st.opened_at == clock.now.isoformat(timespec="seconds")
    assert not check(tmp_path, "nightly", "perf", CFG, now=clock).allowed


def test_half_open_probe_pass_closes(tmp_path: Path) -> None:
    clock = Clock()
    _open(tmp_path, clock)
    clock.advance(3601)
    assert check(tmp_path, "nightly", "perf", CFG, now=clock).probe
    st = record(tmp_path, "nightly", "perf", CFG, passed=True, now=clock)
    assert st.state == "closed"
    assert st.consecutive_failures == 0
    assert [e["event"] for e in st.history][-2:] == ["probe", "closed"]


def test_a_probe_that_never_reported_does_not_wedge_the_breaker(tmp_path: Path) -> None:
    clock = Clock()
    _open(tmp_path, clock)
    clock.advance(3601)
    assert check(tmp_path, "nightly", "perf", CFG, now=clock).probe  # this job is then killed
    clock.advance(3601)
    assert check(tmp_path, "nightly", "perf", CFG, now=clock).probe


def test_reset_is_logged_with_who_and_why(tmp_path: Path) -> None:
    clock = Clock()
    _open(tmp_path, clock)
    st = reset(tmp_path, "nightly", "perf", by="alice", reason="driver 6.2.4 fixed it", now=clock)
    assert st.state == "closed"
    assert st.history[-1] == {
        "at": T0.isoformat(timespec="seconds"),
        "event": "reset",
        "by": "alice",
        "reason": "driver 6.2.4 fixed it",
    }
    assert check(tmp_path, "nightly", "perf", CFG, now=clock).allowed
    with pytest.raises(InputError, match="who and why"):
        reset(tmp_path, "nightly", "perf", by="", reason="x")


def test_state_survives_as_json_and_status_lists_it(tmp_path: Path) -> None:
    _open(tmp_path, Clock())
    [st] = status(tmp_path)
    assert (st.channel, st.job, st.state) == ("nightly", "perf", "open")
    doc = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert doc["schema"] == "gatekeeper.breaker/v1"
    assert not list(tmp_path.glob("*.tmp*")), "atomic writes leave no temp files"


def _hammer(directory: str, n: int) -> None:
    cfg = BreakerConfig(failures=10_000, cooldown_s=60)
    for _ in range(n):
        record(Path(directory), "nightly", "gate", cfg, passed=False)


def test_concurrent_records_lose_no_update(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(str(tmp_path), 10)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    [st] = status(tmp_path)
    assert st.consecutive_failures == 60


@pytest.mark.parametrize(("text", "seconds"), [("24h", 86400), ("90m", 5400), ("30s", 30), ("2d", 172800), ("5", 5)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_bad_inputs_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a duration"):
        parse_duration("soon")
    with pytest.raises(InputError, match="at least 1"):
        BreakerConfig(failures=0)
    with pytest.raises(InputError, match="non-empty name"):
        check(tmp_path, "", "x", CFG)


# ---------------------------------------------------------------- CLI


@pytest.fixture
def ci_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("CI_COMMIT_TAG", "CI_PIPELINE_SOURCE", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "CI_DEFAULT_BRANCH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GATEKEEPER_BREAKER_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_cli_open_breaker_exits_4(ci_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--channel", "nightly", "--job", "verify_hip"]
    for _ in range(3):
        assert main(["breaker", "record", *args, "--exit-code", "1", "--diagnosis", "hipErrorNoBinaryForGpu"]) == 0
    code = main(["breaker", "check", *args])  # reads the state file only: no device, no stage (how fast: not timed)
    assert code == ExitCode.BREAKER_OPEN
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("gatekeeper: breaker: breaker open since ")
    assert "last diagnosis: hipErrorNoBinaryForGpu" in err[0]
    assert main(["breaker", "reset", *args, "--by", "bob", "--reason", "new wheel"]) == 0
    assert main(["breaker", "check", *args]) == ExitCode.PASS
    capsys.readouterr()
    assert main(["breaker", "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["history"][-1]["by"] == "bob"


def test_cli_nightly_on_tag_is_refused_even_without_rules(
    ci_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CI_COMMIT_TAG", "v2.0.0")
    assert main(["breaker", "check", "--channel", "nightly", "--job", "verify_hip"]) == ExitCode.BLOCKED
    assert "never runs on tag pipelines" in capsys.readouterr().err
    assert not ci_env.exists(), "the policy decides before any state is touched"


def test_cli_exit_codes_3_pass_and_others_fail(ci_env: Path) -> None:
    args = ["--channel", "stable", "--job", "gate", "--failures", "2"]
    assert main(["breaker", "record", *args, "--exit-code", "3"]) == 0
    assert main(["breaker", "record", *args, "--exit-code", "137"]) == 0
    assert main(["breaker", "record", *args, "--result", "fail"]) == 0
    assert main(["breaker", "check", *args]) == ExitCode.BREAKER_OPEN


def test_cli_input_errors(ci_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--channel", "stable", "--job", "gate"]
    assert main(["breaker", "record", *args]) == ExitCode.INPUT_ERROR
    assert "exactly one of --result and --exit-code" in capsys.readouterr().err
    assert main(["breaker", "check", *args, "--cooldown", "later"]) == ExitCode.INPUT_ERROR
    ci_env.mkdir(parents=True)
    (ci_env / "stable--gate.json").write_text("{not json")
    assert main(["breaker", "check", *args]) == ExitCode.INPUT_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("gatekeeper: ")
    assert "stable--gate.json" in err[-1]


def test_diagnosis_is_read_from_the_stage_report(tmp_path: Path) -> None:
    from gatekeeper.breaker.markers import diagnosis_from_artifacts

    assert "wrote no report" in (diagnosis_from_artifacts(tmp_path, "functional_test") or "")
    assert breaker.state_dir(None, {"GATEKEEPER_CACHE_DIR": str(tmp_path)}) == tmp_path.resolve() / "breaker"


def test_cli_open_breaker_skips_the_jobs_after_it(ci_env: Path, tmp_path: Path) -> None:
    art = tmp_path / "artifacts" / "nightly"
    args = ["--channel", "nightly", "--failures", "1"]
    assert main(["breaker", "record", *args, "--job", "verify_hip", "--result", "fail"]) == 0
    assert main(["breaker", "check", *args, "--job", "verify_hip", "--artifacts", str(art)]) == ExitCode.BREAKER_OPEN
    marker = json.loads((art / "verify_hip.breaker.json").read_text())
    assert marker["message"].startswith("breaker open since")
    # functional_test's own breaker is closed, but it follows a skipped job: skipped too
    assert main(["breaker", "check", *args, "--job", "functional_test", "--artifacts", str(art)]) == 4
    assert (art / "functional_test.breaker.json").exists()
    # and the gate does not evaluate missing data: skipped, not blocked
    assert (
        main(["breaker", "check", "--channel", "nightly", "--job", "gate", "--policy-only", "--artifacts", str(art)])
        == ExitCode.BREAKER_OPEN
    )
    # a retry of the skipped job itself is decided by its breaker, not by its own old marker
    assert main(["breaker", "reset", "--channel", "nightly", "--job", "verify_hip", "--by", "ci", "--reason", "t"]) == 0
    for later in ("functional_test", "gate"):  # downstream artifacts never reach a retried upstream job
        (art / f"{later}.breaker.json").unlink()
    assert main(["breaker", "check", *args, "--job", "verify_hip", "--artifacts", str(art)]) == ExitCode.PASS


def _stage_report(out_dir: Path, stage: str, status: str) -> None:
    from gatekeeper.contract.stage_report import Check, Environment, StageReport, write_stage

    check_status = "passed" if status == "passed" else "failed"
    write_stage(
        StageReport(
            stage=stage,
            status=status,  # type: ignore[arg-type]
            started_at="2026-12-01T12:00:00+00:00",
            duration_s=1.0,
            environment=Environment(torch_version="2.13.0", python="3.11.7", host="ci", channel="nightly"),
            checks=(Check("smoke.matmul", check_status, "max relative error 3e-1 > 1e-3", 0.1),),
        ),
        out_dir,
    )


def test_cli_after_skips_when_the_same_channel_upstream_did_not_pass(
    ci_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nightly, stable = tmp_path / "artifacts" / "nightly", tmp_path / "artifacts" / "stable"
    args = ["breaker", "check", "--job", "functional_test", "--after", "verify_hip"]
    # no report at all (the upstream job crashed before writing one)
    assert main([*args, "--channel", "nightly", "--artifacts", str(nightly)]) == ExitCode.BREAKER_OPEN
    assert "upstream verify_hip wrote no report" in capsys.readouterr().err
    _stage_report(nightly, "verify_hip", "failed")
    _stage_report(stable, "verify_hip", "passed")
    assert main([*args, "--channel", "nightly", "--artifacts", str(nightly)]) == ExitCode.BREAKER_OPEN
    assert "upstream verify_hip failed (1 failed, 0 errors) on this channel" in capsys.readouterr().err
    assert not (nightly / "functional_test.breaker.json").exists(), "a failed stage is not a breaker skip"
    # the stable chain goes on whatever nightly did
    assert main([*args, "--channel", "stable", "--artifacts", str(stable)]) == ExitCode.PASS
