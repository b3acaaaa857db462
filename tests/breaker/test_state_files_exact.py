"""A breaker state file is read back from a cache that any job could write: every wrong field is one exact
input error naming the file, the field and the fix (written against surviving mutants of
gatekeeper.breaker.state's readers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.breaker.state import STATE_SCHEMA, BreakerState, check, record, reset, state_dir, status
from gatekeeper.core.errors import InputError
from tests.breaker.test_breaker import CFG, Clock

HINT = "delete the file or run 'gatekeeper breaker reset'"


def _write(directory: Path, **fields: Any) -> Path:
    doc = {"schema": STATE_SCHEMA, "channel": "nightly", "job": "verify_hip", "state": "closed", "history": []}
    doc.update(fields)
    path = directory / "nightly--verify_hip.json"
    path.write_text(json.dumps(doc))
    return path


def _error(directory: Path) -> str:
    with pytest.raises(InputError) as err:
        check(directory, "nightly", "verify_hip", CFG, now=Clock())
    return err.value.line()


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("consecutive_failures", "3", "expected int, got str"),
        ("consecutive_failures", True, "expected int, got bool"),
        ("state", 1, "expected str, got int"),
        ("opened_at", 5, "expected str or NoneType, got int"),
        ("last_diagnosis", ["x"], "expected str or NoneType, got list"),
        ("history", "abc", "expected list, got str"),
        ("channel", None, "expected str, got NoneType"),
    ],
)
def test_a_field_of_the_wrong_type_is_named(tmp_path: Path, field: str, value: object, problem: str) -> None:
    path = _write(tmp_path, **{field: value})
    assert _error(tmp_path) == f"{path}:{field}: {problem}; hint: {HINT}"


def test_missing_optional_fields_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "nightly--verify_hip.json"
    path.write_text(json.dumps({"schema": STATE_SCHEMA, "channel": "nightly", "job": "verify_hip"}))
    got = check(tmp_path, "nightly", "verify_hip", CFG, now=Clock())
    assert got.allowed
    assert got.state.history == ()


def test_an_unknown_state_or_event_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, state="wide_open_and_then_some_more")
    assert _error(tmp_path) == f"{path}:state: unknown state 'wide_open_and_then_s'; hint: delete the file"
    path = _write(tmp_path, history=[{"at": "x"}, "event"])
    assert _error(tmp_path) == f"{path}:history: expected a list of events; hint: delete the file"


def test_a_garbled_time_is_named_with_its_field(tmp_path: Path) -> None:
    path = _write(tmp_path, state="open", opened_at="yesterday")
    assert _error(tmp_path) == f"{path}:opened_at: not an ISO 8601 time: 'yesterday'; hint: {HINT}"
    path = _write(
        tmp_path, state="half_open", opened_at="2026-12-01T10:00:00+00:00", probe_started_at="2026-12-01T11:00:00"
    )
    assert _error(tmp_path) == (f"{path}:probe_started_at: time '2026-12-01T11:00:00' has no UTC offset; hint: {HINT}")


def test_an_empty_state_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nightly--verify_hip.json"
    path.write_text("")
    assert _error(tmp_path) == f"{path}: empty breaker state; hint: rerun the step that wrote it"


def test_an_open_breaker_without_its_opening_time_stays_open_for_a_cooldown(tmp_path: Path) -> None:
    _write(tmp_path, state="open", opened_at=None, consecutive_failures=3)
    got = check(tmp_path, "nightly", "verify_hip", CFG, now=Clock())
    assert (got.allowed, got.probe) == (False, False)


def test_a_new_breaker_is_for_its_own_channel_and_job(tmp_path: Path) -> None:
    got = check(tmp_path, "nightly", "verify_hip", CFG, now=Clock())
    assert (got.state.channel, got.state.job) == ("nightly", "verify_hip")
    st = record(tmp_path / "r", "stable", "gate", CFG, passed=False, now=Clock())
    assert (st.channel, st.job) == ("stable", "gate")
    assert st.history[-1]["detail"] == ""  # a failure without a diagnosis records an empty detail
    st = reset(tmp_path / "z", "stable", "gate", by="ann", reason="fixed", now=Clock())
    assert (st.channel, st.job) == ("stable", "gate")


def test_reset_of_a_probing_breaker_clears_the_probe(tmp_path: Path) -> None:
    _write(
        tmp_path,
        state="half_open",
        opened_at="2026-12-01T10:00:00+00:00",
        probe_started_at="2026-12-01T11:00:00+00:00",
        consecutive_failures=3,
    )
    st = reset(tmp_path, "nightly", "verify_hip", by="ann", reason="driver fixed", now=Clock())
    assert (st.state, st.consecutive_failures, st.opened_at, st.probe_started_at) == ("closed", 0, None, None)


def test_status_checks_the_types_of_what_it_lists(tmp_path: Path) -> None:
    path = _write(tmp_path, consecutive_failures="many")
    with pytest.raises(InputError) as err:
        status(tmp_path)
    assert err.value.line() == f"{path}:consecutive_failures: expected int, got str; hint: {HINT}"
    path.write_text("")
    with pytest.raises(InputError) as err:
        status(tmp_path)
    assert err.value.line() == f"{path}: empty breaker state; hint: rerun the step that wrote it"


def test_from_dict_without_history() -> None:
    st = BreakerState.from_dict({"channel": "nightly", "job": "gate"})
    assert st.history == ()


def test_state_dir_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GATEKEEPER_BREAKER_DIR", str(tmp_path / "b"))
    assert state_dir() == tmp_path / "b"


def test_a_time_later_than_the_jobs_clock_is_named_not_obeyed(tmp_path: Path) -> None:
    # 2026-12-04 audit (a file believed about itself): any job with the cache writes breaker state. An opened_at of
    # 9999 kept the breaker open (every job of the channel skipped) until someone reset it by hand; a
    # probe_started_at of 9999 made a probe "run" for ever. A time later than this job's clock is bad input.
    clock = Clock()
    path = _write(tmp_path, state="open", consecutive_failures=3, opened_at="9999-12-31T00:00:00+00:00")
    now = clock.now.isoformat(timespec="seconds")
    assert _error(tmp_path) == (
        f"{path}:opened_at: time '9999-12-31T00:00:00+00:00' is later than this job's clock ({now}); hint: {HINT}"
    )
    path = _write(
        tmp_path, state="half_open", opened_at="2026-01-01T00:00:00+00:00", probe_started_at="9999-01-01T00:00:00Z"
    )
    assert "probe_started_at: time '9999-01-01T00:00:00Z' is later than this job's clock" in _error(tmp_path)
    # "9999-12-31T23:59:00-01:00" is past the last time Python holds: named, not a crash
    _write(tmp_path, state="open", opened_at="9999-12-31T23:59:00-01:00")
    assert "opened_at: time '9999-12-31T23:59:00-01:00' is out of range" in _error(tmp_path)


def test_a_lock_planted_as_a_link_or_directory_is_named_and_never_followed(tmp_path: Path) -> None:
    # 2026-12-04 audit: the breaker's lock was open(path, "a+"): a link planted as nightly--verify_hip.lock (the
    # state directory is in a cache any job writes) created an empty file wherever it pointed; a directory there
    # was exit 70. The lock is opened without following a link (core/locking.open_lock): exit 2 naming it.
    _write(tmp_path, state="closed")
    lock = tmp_path / "nightly--verify_hip.lock"
    target = tmp_path / "elsewhere" / "created-by-gatekeeper"
    target.parent.mkdir()
    lock.symlink_to(target)
    assert _error(tmp_path).startswith(f"{lock}: cannot open the lock file")
    assert not target.exists()
    lock.unlink()
    lock.mkdir()
    assert _error(tmp_path).startswith(f"{lock}: cannot open the lock file")
    lock.rmdir()
    assert check(tmp_path, "nightly", "verify_hip", CFG, now=Clock()).allowed  # a lock it makes itself is fine
