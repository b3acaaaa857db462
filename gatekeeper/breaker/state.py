"""The stateful circuit breaker per channel and job (the static policy is in ``breaker.policy``).

The stateful breaker stops a channel that keeps failing from spending
GPU time: closed -> open after N consecutive failures -> half-open after a
cool-down -> one probe run decides (pass closes it, fail opens it again).

State lives in one JSON file per channel and job under a state directory
(by default inside the kernel-cache root, so GitLab's ``cache:`` keeps it
between pipelines). Writes are atomic and serialised by a lock file, so two
jobs on one runner cannot lose each other's update.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.locking import open_lock
from gatekeeper.core.paths import cache_root

__all__ = [
    "DEFAULT_COOLDOWN_S",
    "DEFAULT_FAILURES",
    "BreakerConfig",
    "BreakerState",
    "Decision",
    "check",
    "parse_duration",
    "record",
    "reset",
    "state_dir",
    "status",
]

STATE_SCHEMA = "gatekeeper.breaker/v1"
DEFAULT_FAILURES = 3
DEFAULT_COOLDOWN_S = 24 * 3600.0
HISTORY_KEPT = 50

State = Literal["closed", "open", "half_open"]
Clock = Callable[[], dt.datetime]


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


# ---------------------------------------------------------------- state


@dataclass(frozen=True)
class BreakerConfig:
    failures: int = DEFAULT_FAILURES
    cooldown_s: float = DEFAULT_COOLDOWN_S

    def __post_init__(self) -> None:
        if self.failures < 1:
            raise InputError(None, "--failures", f"must be at least 1 (got {self.failures})", "e.g. --failures 3")
        if self.cooldown_s < 0:
            raise InputError(None, "--cooldown", f"must not be negative (got {self.cooldown_s})", "e.g. 24h")


@dataclass(frozen=True)
class BreakerState:
    channel: str
    job: str
    state: State = "closed"
    consecutive_failures: int = 0
    opened_at: str | None = None
    probe_started_at: str | None = None
    last_failure_at: str | None = None
    last_diagnosis: str | None = None
    last_job_url: str | None = None
    history: tuple[dict[str, Any], ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["history"] = list(self.history)
        return {"schema": STATE_SCHEMA, **out}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BreakerState:
        known = set(cls.__dataclass_fields__)
        fields = {k: v for k, v in d.items() if k in known}
        fields["history"] = tuple(d.get("history", ()))
        return cls(**fields)

    def log(self, event: dict[str, Any]) -> BreakerState:
        return replace(self, history=(*self.history, event)[-HISTORY_KEPT:])


@dataclass(frozen=True)
class Decision:
    allowed: bool
    probe: bool
    state: BreakerState
    message: str


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def state_dir(explicit: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    chosen = explicit or env.get("GATEKEEPER_BREAKER_DIR")
    return Path(chosen) if chosen else cache_root(env) / "breaker"


def _state_path(directory: Path, channel: str, job: str) -> Path:
    for what, value in (("--channel", channel), ("--job", job)):
        if not value or not _SAFE.sub("", value):
            raise InputError(None, what, f"must be a non-empty name (got {value!r})", "e.g. --channel nightly")
    return directory / f"{_SAFE.sub('_', channel)}--{_SAFE.sub('_', job)}.json"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_lock(path.with_suffix(".lock")) as lock:  # a regular file, never a link's target
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _load(path: Path, channel: str, job: str) -> BreakerState:
    if not path.exists() and not path.is_symlink():  # a symlink loop is no state: read_json refuses it (exit 2)
        return BreakerState(channel, job)
    doc = files.read_json(path, what="breaker state")
    if not isinstance(doc, dict) or doc.get("schema") != STATE_SCHEMA:
        raise InputError(
            path, "schema", f"not a {STATE_SCHEMA} state file", "delete it or run 'gatekeeper breaker reset'"
        )
    _check_types(doc, path)
    return BreakerState.from_dict(doc)


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "channel": (str,),
    "job": (str,),
    "state": (str,),
    "consecutive_failures": (int,),
    "opened_at": (str, type(None)),
    "probe_started_at": (str, type(None)),
    "last_failure_at": (str, type(None)),
    "last_diagnosis": (str, type(None)),
    "last_job_url": (str, type(None)),
    "history": (list,),
}


def _check_types(doc: Mapping[str, Any], path: Path) -> None:
    """A state file is read back from a cache anyone with a job could write: wrong types are bad input."""
    for name, kinds in _FIELD_TYPES.items():
        value = doc.get(name)
        if name in doc and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise InputError(
                path, name, f"expected {' or '.join(k.__name__ for k in kinds)}, got {type(value).__name__}",
                "delete the file or run 'gatekeeper breaker reset'",
            )  # fmt: skip
    if doc.get("state", "closed") not in ("closed", "open", "half_open"):
        raise InputError(path, "state", f"unknown state {str(doc['state'])[:20]!r}", "delete the file")
    if not all(isinstance(e, dict) for e in doc.get("history", [])):
        raise InputError(path, "history", "expected a list of events", "delete the file")


def _save(path: Path, state: BreakerState) -> None:
    files.write_json(path, state.to_dict())


def _iso(t: dt.datetime) -> str:
    return t.isoformat(timespec="seconds")


def _parse_time(text: str, path: Path, field: str, now: dt.datetime) -> dt.datetime:
    """Aware UTC; a naive or garbled time in the state file is bad input (exit 2), not a crash. So is one later
    than this job's clock: an ``opened_at`` or ``probe_started_at`` of 9999 (any job with the cache writes the
    state) kept the breaker open, or its probe "running", for ever."""
    from gatekeeper.core.budgets import aware_utc

    hint = "delete the file or run 'gatekeeper breaker reset'"
    return aware_utc(text, path=path, where=field, hint=hint, not_after=now)


# ---------------------------------------------------------------- transitions


def check(directory: Path, channel: str, job: str, config: BreakerConfig, *, now: Clock = _utc_now) -> Decision:
    """May this job run? Open: no (until the cool-down passed: then this run is the probe)."""
    path = _state_path(directory, channel, job)
    with _locked(path):
        st = _load(path, channel, job)
        t = now()
        if st.state == "closed":
            return Decision(
                True,
                False,
                st,
                f"breaker closed for {channel}/{job} ({st.consecutive_failures} "
                f"consecutive failure(s) of {config.failures} allowed)",
            )
        opened = _parse_time(st.opened_at, path, "opened_at", t) if st.opened_at else t
        probe_since = _parse_time(st.probe_started_at, path, "probe_started_at", t) if st.probe_started_at else None
        # A probe that never recorded its result (job killed) must not wedge the breaker.
        probe_running = probe_since is not None and (t - probe_since).total_seconds() < config.cooldown_s
        waited = (t - opened).total_seconds()
        if (st.state == "open" and waited < config.cooldown_s) or (st.state == "half_open" and probe_running):
            reason = (
                "a probe run is in progress"
                if st.state == "half_open"
                else (f"cool-down ends {_iso(opened + dt.timedelta(seconds=config.cooldown_s))}")
            )
            msg = (
                f"breaker open since {st.opened_at} for {channel}/{job} after {st.consecutive_failures} "
                f"consecutive failure(s), last diagnosis: {st.last_diagnosis or 'none recorded'}"
                f"{f' ({st.last_job_url})' if st.last_job_url else ''}; {reason}; skipped without using "
                f"the device. Reset: gatekeeper breaker reset --channel {channel} --job {job} --by NAME --reason WHY"
            )
            return Decision(False, False, st, msg)
        st = replace(st, state="half_open", probe_started_at=_iso(t)).log(
            {"at": _iso(t), "event": "probe", "detail": "cool-down passed; this run decides"}
        )
        _save(path, st)
        return Decision(True, True, st, f"breaker half-open for {channel}/{job}: this run is the probe that decides")


def record(
    directory: Path,
    channel: str,
    job: str,
    config: BreakerConfig,
    *,
    passed: bool,
    diagnosis: str | None = None,
    job_url: str | None = None,
    now: Clock = _utc_now,
) -> BreakerState:
    path = _state_path(directory, channel, job)
    with _locked(path):
        st = _load(path, channel, job)
        t = _iso(now())
        if passed:
            event = "closed" if st.state != "closed" else "pass"
            st = replace(st, state="closed", consecutive_failures=0, opened_at=None, probe_started_at=None)
            st = st.log({"at": t, "event": event, "detail": job_url or ""})
        else:
            failures = st.consecutive_failures + 1
            st = replace(
                st,
                consecutive_failures=failures,
                last_failure_at=t,
                last_diagnosis=diagnosis or st.last_diagnosis,
                last_job_url=job_url or st.last_job_url,
            )
            if st.state == "half_open" or (st.state == "closed" and failures >= config.failures):
                st = replace(st, state="open", opened_at=t, probe_started_at=None)
                st = st.log({"at": t, "event": "opened", "detail": f"{failures} consecutive failure(s)"})
            else:
                st = st.log({"at": t, "event": "fail", "detail": diagnosis or ""})
        _save(path, st)
        return st


def reset(directory: Path, channel: str, job: str, *, by: str, reason: str, now: Clock = _utc_now) -> BreakerState:
    if not by.strip() or not reason.strip():
        raise InputError(None, "--by/--reason", "a reset needs who and why", "e.g. --by alice --reason 'driver fixed'")
    path = _state_path(directory, channel, job)
    with _locked(path):
        st = _load(path, channel, job)
        st = replace(st, state="closed", consecutive_failures=0, opened_at=None, probe_started_at=None)
        st = st.log({"at": _iso(now()), "event": "reset", "by": by, "reason": reason})
        _save(path, st)
        return st


def status(directory: Path) -> list[BreakerState]:
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.glob("*--*.json")):
        doc = files.read_json(path, what="breaker state")
        if isinstance(doc, dict) and doc.get("schema") == STATE_SCHEMA:
            _check_types(doc, path)
            out.append(BreakerState.from_dict(doc))
    return out


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """'24h', '90m', '30s', '2d' or plain seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not m:
        raise InputError(None, "--cooldown", f"not a duration: {text!r}", "use e.g. 24h, 90m, 30s or 2d")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]
