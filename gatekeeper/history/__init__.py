"""Baseline stores: where earlier stage results come from, behind one Protocol.

``--baseline`` takes a store spec: a directory (``DIR`` or ``file:DIR``: stage
JSON files of an earlier pipeline), ``sqlite:PATH``, ``gitlab:`` or
``git:BRANCH``. STORES is the explicit registry of spec prefixes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gatekeeper.contract.stage_report import Environment, StageReport

__all__ = ["STORES", "BaselineStore", "RunInfo", "comparability", "open_store"]


@dataclass(frozen=True)
class RunInfo:
    """Where a stage result came from: recorded beside it by stores that keep history."""

    ref: str | None = None  # branch or tag
    commit: str | None = None
    pipeline_id: str | None = None
    verdict: str | None = None  # the gate verdict of that pipeline, when known
    recorded_at: str | None = None


class BaselineStore(Protocol):
    """One interface for every store; each takes its location as an argument."""

    def latest(self, stage: str, like: StageReport) -> StageReport | None:
        """The newest stored result of ``stage`` comparable with ``like`` (see ``comparability``)."""
        ...

    def history(
        self, stage: str, *, channel: str | None = None, limit: int = 50
    ) -> Sequence[tuple[RunInfo, StageReport]]:
        """Newest first."""
        ...

    def save(self, report: StageReport, info: RunInfo) -> None: ...


# The environment fields that must match for two results to be compared at all.
_MUST_MATCH = ("device_kind", "arch")


def comparability(baseline: StageReport, candidate: StageReport) -> str | None:
    """None when comparable, else the reason in plain words (never compared silently)."""
    b, c = baseline.environment, candidate.environment
    for name in _MUST_MATCH:
        bv, cv = _env_value(b, name), _env_value(c, name)
        if bv != cv:
            return f"baseline ran on {name} {bv}, this run on {cv}"
    if _minor(b.rocm_version) != _minor(c.rocm_version):
        return f"baseline ran on ROCm {b.rocm_version}, this run on ROCm {c.rocm_version}"
    # "sweep": a sweep's points are compared point by point with the same sweep's, never with a single run
    for key in ("model", "batch_size", "input_shape", "sweep"):
        if baseline.config.get(key) != candidate.config.get(key):
            return f"baseline used {key}={baseline.config.get(key)!r}, this run {key}={candidate.config.get(key)!r}"
    return None


def _env_value(env: Environment, name: str) -> Any:
    return env.arch if name == "arch" else getattr(env, name)


def _minor(version: str | None) -> str | None:
    return ".".join(version.split(".")[:2]) if version else None


def _open_file_store(location: str, environ: Mapping[str, str] | None = None) -> BaselineStore:
    from gatekeeper.history.file import FileStore

    return FileStore(location)


def _open_sqlite_store(location: str, environ: Mapping[str, str] | None = None) -> BaselineStore:
    from gatekeeper.history.sqlite import SqliteStore

    return SqliteStore(location)


def _open_gitlab_store(location: str, environ: Mapping[str, str] | None = None) -> BaselineStore:
    from gatekeeper.history.gitlab import GitLabStore

    return GitLabStore.from_env(location, environ)


def _open_git_store(location: str, environ: Mapping[str, str] | None = None) -> BaselineStore:
    from gatekeeper.history.git import GitStore

    env = os.environ if environ is None else environ
    return GitStore(location, remote=env.get("GATEKEEPER_GIT_REMOTE") or None)


# spec prefix -> factory(location, environ): environ is where gitlab: and git: read their variables
STORES: dict[str, Callable[[str, Mapping[str, str] | None], BaselineStore]] = {
    "file": _open_file_store,
    "sqlite": _open_sqlite_store,
    "gitlab": _open_gitlab_store,
    "git": _open_git_store,
}


def open_store(spec: str, environ: Mapping[str, str] | None = None) -> BaselineStore:
    from gatekeeper.core.errors import InputError

    prefix, sep, location = spec.partition(":")
    if not sep or len(prefix) == 1:  # a bare directory (or a Windows drive letter)
        prefix, location = "file", spec
    factory = STORES.get(prefix)
    if factory is None:
        raise InputError(None, "--baseline", f"unknown baseline store {prefix!r}", f"use one of: {', '.join(STORES)}")
    return factory(location, environ)
