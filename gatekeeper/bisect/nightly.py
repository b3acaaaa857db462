"""``gatekeeper bisect --since-green STATE --verdict V``: bisect the night the nightly channel turned red.

A scheduled pipeline's nightly gate writes its verdict; this step compares it
with the previous night's, kept in a small state file (the CI template keeps it
in the job's cache), and plans a bisection only when tonight is red (blocked)
and the previous night was green (pass or warn): a channel that stays red is
not bisected again every night. What changed decides the provider: a new torch
(the nightly wheel) is bisected over the torch versions of the nightly index
(``--index-url``), else a new commit over the commits. The state then records
tonight, whatever happens next.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from gatekeeper.contract import schemas
from gatekeeper.contract.verdict import read_verdict
from gatekeeper.core import files
from gatekeeper.core.errors import InputError

__all__ = ["Plan", "plan_since_green"]

STATE_SCHEMA = "gatekeeper.bisect-nightly/v1"
COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
GREEN = ("pass", "warn")


@dataclass(frozen=True)
class Plan:
    provider: str | None  # None: nothing to bisect (reason says why)
    good: str = ""
    bad: str = ""
    options: dict[str, str | None] = field(default_factory=dict)
    reason: str = ""


def _night(doc: Any) -> dict[str, Any] | None:
    """A valid recorded night, or None: values that are not a version or a commit are dropped."""
    if not isinstance(doc, dict) or doc.get("schema") != STATE_SCHEMA or doc.get("result") not in (*GREEN, "blocked"):
        return None
    torch, commit = doc.get("torch_version"), doc.get("commit")
    try:
        # packaging's Version takes surrounding whitespace (a newline too): the value is used only as written
        torch = str(torch) if torch and str(torch) == str(torch).strip() and Version(str(torch)) else None
    except InvalidVersion:
        torch = None
    commit = str(commit) if isinstance(commit, str) and COMMIT.fullmatch(commit) else None
    return {**doc, "torch_version": torch, "commit": commit}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)[:64]


def _read_state(path: Path) -> Any:
    """The recorded night: strict JSON (``files.read_json``), valid against the ``STATE_SCHEMA`` schema."""
    doc = files.read_json(path, what="nightly bisect state")
    schemas.validate(STATE_SCHEMA, doc, path=str(path))
    return doc


def plan_since_green(*, verdict: Path | None, state: Path, index_url: str | None) -> Plan:
    if verdict is None:
        raise InputError(
            None, "--since-green", "needs tonight's nightly verdict", "add --verdict artifacts/nightly/verdict.json"
        )
    v = read_verdict(verdict)
    if v.channel != "nightly":
        raise InputError(
            verdict,
            "channel",
            f"is {v.channel!r}: --since-green watches the nightly channel",
            "pass the nightly channel's verdict.json",
        )
    tonight = _night(
        {
            "schema": STATE_SCHEMA,
            "result": v.result,
            "commit": (v.context or {}).get("commit"),
            "torch_version": (v.environment or {}).get("torch_version"),
            "pipeline_id": _text((v.context or {}).get("pipeline_id")),
            "generated_at": _text(v.generated_at),
        }
    )
    if state.is_dir():
        raise InputError(state, "", "is a directory: the nightly bisect state is one file", "pass a file path")
    previous, set_aside = None, ""
    if state.exists() or state.is_symlink():
        try:
            previous = _night(_read_state(state))
        except InputError as err:  # the job's cache: any job can write it; a bad one is no previous night
            set_aside = f" (the state file was set aside: {err})"
    if tonight is not None:
        files.write_json(state, tonight)
    if tonight is None:
        return Plan(None, reason=f"tonight's nightly verdict is {v.result}: nothing to bisect")
    if previous is None:
        return Plan(
            None,
            reason=f"no record of the previous night in {state} (the first night, or the cache was lost): "
            f"not bisecting{set_aside}",
        )
    if tonight["result"] != "blocked":
        return Plan(None, reason=f"tonight's nightly gate is {tonight['result']}: nothing to bisect")
    if previous["result"] not in GREEN:
        return Plan(
            None,
            reason="the previous night was red too: the change was bisected then (the manual "
            "gatekeeper:bisect job reruns a bisection)",
        )
    good_torch, bad_torch = previous["torch_version"], tonight["torch_version"]
    if good_torch and bad_torch and good_torch != bad_torch:
        if not index_url:
            raise InputError(
                None,
                "--index-url",
                f"torch changed ({good_torch} -> {bad_torch}) but no nightly index was given",
                "pass the nightly index, e.g. --index-url https://download.pytorch.org/whl/nightly/rocm6.2",
            )
        return Plan(
            "pip",
            good_torch,
            bad_torch,
            {"package": "torch", "index_url": index_url, "find_links": None},
            f"the nightly channel turned red after a green night; torch changed {good_torch} -> {bad_torch}: "
            "bisecting the torch nightlies",
        )
    good_sha, bad_sha = previous["commit"], tonight["commit"]
    if good_sha and bad_sha and good_sha != bad_sha:
        return Plan(
            "git",
            good_sha,
            bad_sha,
            {},
            f"the nightly channel turned red after a green night; the commit "
            f"changed {good_sha[:10]} -> {bad_sha[:10]} (torch did not): bisecting the commits",
        )
    return Plan(
        None,
        reason="the nightly channel turned red after a green night, but neither torch nor the commit "
        "changed: nothing to bisect (a flaky check or the machine; see the diagnosis)",
    )
