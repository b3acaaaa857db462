"""Baseline stores: where earlier stage results come from, behind one Protocol.

``--baseline`` takes a store spec: a directory (``DIR`` or ``file:DIR``: stage
JSON files of an earlier pipeline), ``sqlite:PATH``, ``postgresql://USER@HOST/DB``,
``gitlab:`` or ``git:BRANCH``. Reading never creates a store: ``create=True`` is for
the uses that record (evaluate --record, history import, history anchor), and
``missing_ok=True`` reads a store that does not exist yet as an empty one. STORES is
the explicit registry of spec prefixes. The types and rules every store shares live
in ``gatekeeper.history.baseline`` (re-exported here).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import NamedTuple

from gatekeeper.history.baseline import (
    BASELINE_VERDICTS,
    BaselineStore,
    RunInfo,
    baseline_branch,
    comparability,
    history_noting,
    unusable,
)

__all__ = [
    "BASELINE_VERDICTS",
    "STORES",
    "BaselineStore",
    "Opening",
    "RunInfo",
    "baseline_branch",
    "comparability",
    "history_noting",
    "open_store",
    "unusable",
]


class Opening(NamedTuple):
    """How a store is opened: where gitlab: and git: read their variables, and whether it may be created."""

    environ: Mapping[str, str] | None = None
    create: bool = False
    missing_ok: bool = False

    @property
    def project(self) -> str | None:
        """The repository a shared store is read for (CI_PROJECT_PATH); None outside CI."""
        return (os.environ if self.environ is None else self.environ).get("CI_PROJECT_PATH") or None


def _open_file_store(location: str, how: Opening) -> BaselineStore:
    from gatekeeper.history.file import FileStore

    return FileStore(location, missing_ok=how.missing_ok)


def _open_sqlite_store(location: str, how: Opening) -> BaselineStore:
    from gatekeeper.history.sqlite import SqliteStore

    return SqliteStore(location, create=how.create, missing_ok=how.missing_ok, project=how.project)


def _open_postgres_store(location: str, how: Opening) -> BaselineStore:
    from gatekeeper.history.postgres import PostgresStore

    return PostgresStore(f"postgresql:{location}", create=how.create, missing_ok=how.missing_ok, project=how.project)


def _open_gitlab_store(location: str, how: Opening) -> BaselineStore:
    from gatekeeper.history.gitlab import GitLabStore

    return GitLabStore.from_env(location, how.environ)


def _open_git_store(location: str, how: Opening) -> BaselineStore:
    from gatekeeper.history.git import GitStore

    env = os.environ if how.environ is None else how.environ
    return GitStore(location, remote=env.get("GATEKEEPER_GIT_REMOTE") or None)


# spec prefix -> factory(location, how)
STORES: dict[str, Callable[[str, Opening], BaselineStore]] = {
    "file": _open_file_store,
    "sqlite": _open_sqlite_store,
    "postgresql": _open_postgres_store,
    "postgres": _open_postgres_store,
    "gitlab": _open_gitlab_store,
    "git": _open_git_store,
}


def open_store(
    spec: str, environ: Mapping[str, str] | None = None, *, create: bool = False, missing_ok: bool = False
) -> BaselineStore:
    from gatekeeper.core.errors import InputError

    prefix, sep, location = spec.partition(":")
    if not sep or len(prefix) == 1:  # a bare directory (or a Windows drive letter)
        prefix, location = "file", spec
    factory = STORES.get(prefix)
    if factory is None:
        raise InputError(  # the spec may come from --baseline, --record, --history, --from or --into
            None, "store spec", f"unknown baseline store {prefix!r}", f"use one of: {', '.join(STORES)}"
        )
    return factory(location, Opening(environ, create, missing_ok))
