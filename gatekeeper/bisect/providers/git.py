"""``--provider git``: the commits of the current repository, each checked out in a temporary worktree.

The range is the first-parent line from the good commit to the bad one (``git
rev-list --first-parent``, as ``git bisect --first-parent``): a merged branch
counts as its merge commit. The stage or command runs with the worktree as its
working directory and first on ``PYTHONPATH``, so ``--model pkg.mod:build`` and
``python -m pytest`` import that commit's code.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gatekeeper.bisect.providers.base import Candidate, Prepared, Unavailable, clean_env
from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import shell

__all__ = ["GitProvider"]

GIT_TIMEOUT_S = 300
MAX_LOG = 200  # commits shown in "what changed"
MAX_STAT_LINES = 60
_GATEKEEPER_ROOT = str(Path(__file__).resolve().parents[3])


class GitProvider:
    name = "git"

    def __init__(self, repo: str | Path = ".") -> None:
        self.path = Path(repo)
        self._repo: Any = None

    def options(self) -> dict[str, str | None]:
        return {}

    def check_tools(self) -> None:
        if shutil.which("git") is None:
            raise InputError(None, "--provider git", "git is not installed", "install git (apt-get install git)")
        import git

        try:
            self._repo = git.Repo(self.path, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise InputError(
                self.path, "", "not inside a git repository", "run gatekeeper bisect --provider git in the repository"
            ) from None

    @property
    def repo(self) -> Any:
        if self._repo is None:
            self.check_tools()
        return self._repo

    def _sha(self, ref: str, option: str) -> str:
        import git

        try:
            return str(self.repo.commit(ref).hexsha)
        except (git.BadName, ValueError, git.GitCommandError):
            raise InputError(
                None, option, f"{ref!r} is not a commit here", "fetch it first, e.g. git fetch origin main --tags"
            ) from None

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        g, b = self._sha(good, "--good"), self._sha(bad, "--bad")
        if g == b:
            raise InputError(
                None,
                "--good",
                f"{good!r} and --bad {bad!r} are the same commit: the range is empty",
                "give the last commit known to be good as --good",
            )
        if not self.repo.is_ancestor(g, b):
            raise InputError(
                None,
                "--good",
                f"{good!r} is not older than --bad {bad!r} (not an ancestor of it)",
                "swap them, or pick a --good from the history of --bad",
            )
        fmt = "%H%x1f%an%x1f%aI%x1f%s"
        text = self.repo.git.log(
            "--first-parent", "--reverse", f"--format={fmt}", f"{g}..{b}", kill_after_timeout=GIT_TIMEOUT_S
        )
        rows = [self._row(line) for line in text.splitlines() if line.strip()]
        head = self._row(self.repo.git.log("-1", f"--format={fmt}", g, kill_after_timeout=GIT_TIMEOUT_S))
        out = [head, *rows]
        if out[-1]["sha"] != b:
            raise InputError(
                None,
                "--good",
                f"{bad!r} is not on the first-parent line from {good!r}",
                "give a --good on the first-parent history of --bad (git log --first-parent)",
            )
        return [
            Candidate(i, r["sha"], r["sha"][:10], {k: v for k, v in r.items() if k != "sha"}) for i, r in enumerate(out)
        ]

    @staticmethod
    def _row(line: str) -> dict[str, str]:
        sha, author, date, subject = ([*line.split("\x1f"), "", "", ""])[:4]
        return {"sha": sha.strip(), "author": author[:100], "date": date, "subject": subject[:200]}

    def prepare(self, candidate: Candidate, workdir: Path) -> Prepared:
        import git

        ref = _commit(candidate)
        tree = workdir / f"tree-{candidate.index:04d}"
        if tree.exists():
            self._remove(tree)
        try:
            self.repo.git.worktree("add", "--detach", str(tree), ref, kill_after_timeout=GIT_TIMEOUT_S)
        except git.GitCommandError as err:
            raise Unavailable(f"git worktree add failed: {_first_line(err.stderr or str(err))}") from None
        path = os.pathsep.join(p for p in (str(tree), _GATEKEEPER_ROOT, os.environ.get("PYTHONPATH", "")) if p)
        env = clean_env({"PYTHONPATH": path})
        return Prepared(candidate, tree, env, (sys.executable,), {"commit": candidate.ref}, tree)

    def cleanup(self, prepared: Prepared) -> None:
        self._remove(Path(prepared.handle))

    def _remove(self, tree: Path) -> None:
        import git

        try:
            self.repo.git.worktree("remove", "--force", str(tree), kill_after_timeout=GIT_TIMEOUT_S)
        except git.GitCommandError:
            shutil.rmtree(tree, ignore_errors=True)
            with contextlib.suppress(git.GitCommandError):
                self.repo.git.worktree("prune", kill_after_timeout=GIT_TIMEOUT_S)

    def changes(self, last_good: Candidate, first_bad: Candidate, facts: Mapping[int, Mapping[str, Any]]) -> dict:
        fmt = "%H%x1f%an%x1f%aI%x1f%s"
        good, bad = _commit(last_good), _commit(first_bad)
        text = self.repo.git.log(
            f"--format={fmt}", f"--max-count={MAX_LOG + 1}", f"{good}..{bad}", kill_after_timeout=GIT_TIMEOUT_S
        )
        rows = [self._row(line) for line in text.splitlines() if line.strip()]
        stat = self.repo.git.diff("--stat=120", good, bad, kill_after_timeout=GIT_TIMEOUT_S)
        lines = stat.splitlines()
        return {
            "kind": "commits",
            "from": last_good.ref,
            "to": first_bad.ref,
            "commits": rows[:MAX_LOG],
            "more_commits": len(rows) > MAX_LOG,
            "diffstat": lines[:MAX_STAT_LINES]
            + ([f"... {len(lines) - MAX_STAT_LINES} more lines"] if len(lines) > MAX_STAT_LINES else []),
        }

    def repro_steps(self, candidate: Candidate) -> list[str]:
        where = f"../repro-{_commit(candidate)[:10]}"
        return [
            f"git fetch origin {shell(candidate.ref)} || true",
            f"git worktree add --detach {shell(where)} {shell(candidate.ref)}",
            f"cd {shell(where)}",
        ]


_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _commit(candidate: Candidate) -> str:
    """The candidate's commit as git is given it: a full SHA, as ``candidates`` lists it. A resumed bisect.json
    is a file: a ref there like ``--output=PATH`` would be an option to git (it writes that file), never a ref."""
    if not _SHA.fullmatch(candidate.ref):
        raise InputError(
            None, f"bisect.json candidates[{candidate.index}].ref",
            f"{candidate.ref[:80]!r} is not a full commit SHA (the git provider records only those)",
            "do not edit bisect.json by hand; start the bisection again in a new --out",
        )  # fmt: skip
    return candidate.ref


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no message"
