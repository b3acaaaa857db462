"""Baseline stores: where earlier stage results come from, behind one Protocol.

``--baseline`` takes a store spec: a directory (``DIR`` or ``file:DIR``: stage
JSON files of an earlier pipeline), ``sqlite:PATH``, ``gitlab:`` or
``git:BRANCH``. STORES is the explicit registry of spec prefixes. The types and
rules every store shares live in ``gatekeeper.history.baseline`` (re-exported here).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from gatekeeper.history.baseline import (
    BASELINE_VERDICTS,
    BaselineStore,
    RunInfo,
    baseline_branch,
    comparability,
    unusable,
)

__all__ = [
    "BASELINE_VERDICTS",
    "STORES",
    "BaselineStore",
    "RunInfo",
    "baseline_branch",
    "comparability",
    "open_store",
    "unusable",
]


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
