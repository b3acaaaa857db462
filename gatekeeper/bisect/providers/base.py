"""The one interface every provider implements: list the candidates, prepare one, clean it up.

A *candidate* is one point of the range between a known good and a known bad:
a commit, a package version, an image tag. A provider lists them oldest first
(the good one first, the bad one last), prepares an environment in which a
stage or a command runs against one of them, and removes that environment
again. What changed between two candidates (commits, versions, digests) and how
to recreate one by hand (for the reproduction bundle) are the provider's too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = ["OUT", "Candidate", "Invocation", "Prepared", "Provider", "Unavailable"]

# The place holder for the output directory in an argv given to Prepared.render: a container sees it elsewhere.
OUT = "\x00gatekeeper-out\x00"


class Unavailable(Exception):
    """This candidate cannot be built, installed or pulled: it is skipped and named, like ``git bisect skip``."""


@dataclass(frozen=True)
class Candidate:
    index: int
    ref: str  # the provider's identity: a full commit SHA, a version, an image reference
    label: str  # short, for tables and progress lines
    info: Mapping[str, Any] = field(default_factory=dict)  # what listing found (subject, date, wheel file...)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "ref": self.ref, "label": self.label, "info": dict(self.info)}


@dataclass(frozen=True)
class Invocation:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path


@dataclass
class Prepared:
    """An environment for one candidate. ``python``: the argv prefix that runs its Python."""

    candidate: Candidate
    cwd: Path
    env: dict[str, str]
    python: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)
    handle: Any = None  # the provider's own (a worktree path, a venv directory, a container engine)

    def render(self, argv: Sequence[str], out: Path, *, python: bool = False) -> Invocation:
        """The argv to run here; ``python``: prefix this environment's Python. ``OUT`` becomes ``out``."""
        full = [*(self.python if python else ()), *argv]
        return Invocation(tuple(str(out) if a == OUT else a for a in full), dict(self.env), self.cwd)


class Provider(Protocol):
    """What the bisection needs from a provider (git, pip, image)."""

    name: str

    def check_tools(self) -> None:
        """InputError naming the missing tool and how to get it (exit 2) before anything runs."""

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        """Oldest first, ``good`` first and ``bad`` last; InputError when the range is empty or reversed."""

    def prepare(self, candidate: Candidate, workdir: Path) -> Prepared:
        """An environment for ``candidate`` under ``workdir``; ``Unavailable`` when it cannot be had."""

    def cleanup(self, prepared: Prepared) -> None:
        """Remove what ``prepare`` made (never raises)."""

    def changes(self, last_good: Candidate, first_bad: Candidate, facts: Mapping[int, Mapping[str, Any]]) -> dict:
        """What changed between the two: commit log, package versions, image digests (``facts``: from prepare)."""

    def repro_steps(self, candidate: Candidate) -> list[str]:
        """Shell lines (quoted) that recreate ``candidate``'s environment by hand, ending in it."""

    def options(self) -> dict[str, str | None]:
        """The provider's options, as bisect.json records them (``--resume`` compares them)."""


def clean_env(extra: Mapping[str, str] | None = None, *, drop: Sequence[str] = ()) -> dict[str, str]:
    """This process's environment without ``drop``, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra or {})
    return env
