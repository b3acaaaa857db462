"""The hostile corpus: inputs an attacker (or a broken tool) can put where gatekeeper reads.

Generated, not checked in: FIFOs, symlink loops and deep nesting cannot live in git.
Each builder writes one hostile file at ``path`` (the name gatekeeper will look for).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path

from tests.security.hostile import NASTY

STAGE = {
    "schema": "gatekeeper.stage/v1", "stage": "functional_test", "status": "failed",
    "started_at": "2026-12-01T10:00:00+00:00", "duration_s": 1.0,
    "environment": {"torch_version": "2.5.1", "python": "3.11", "host": "h", "channel": "stable"},
    "metrics": {}, "checks": [{"name": NASTY, "status": "failed", "message": NASTY, "duration_s": 0.1}],
}  # fmt: skip


def _text(data: str | bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)

    return write


def _json(doc: object) -> Callable[[Path], None]:
    return _text(json.dumps(doc))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _loop(path: Path) -> None:
    path.symlink_to(path.name)


def _dangling(path: Path) -> None:
    path.symlink_to("does-not-exist")


def _truncated_gzip(path: Path) -> None:
    path.write_bytes(gzip.compress(b"Traceback (most recent call last):\n" * 1000)[:200])


def _with(**changes: object) -> dict:
    return {**STAGE, **changes}


# Every kind of file, hostile in the same ways.
GENERIC: dict[str, Callable[[Path], None]] = {
    "empty": _text(""),
    "not utf-8": _text(b"\xff\xfe\x00garbage\x80\x81"),
    "utf-8 bom": _text("\ufeff{}"),
    "nul bytes": _text("\x00" * 100),
    "deep nesting": _text("[" * 200_000 + "]" * 200_000),
    "fifo": _fifo,
    "directory": _directory,
    "symlink loop": _loop,
    "dangling symlink": _dangling,
    "json list": _json([1, 2, 3]),
    "json string": _json(NASTY),
    "nan": _text('{"schema": NaN, "value": Infinity}'),
    "huge number": _text('{"n": ' + "9" * 5000 + "}"),
}
STAGE_JSON: dict[str, Callable[[Path], None]] = {
    **GENERIC,
    "wrong types": _json(_with(checks="not a list", metrics=[], duration_s="fast")),
    "nan metric": _text(json.dumps(_with(metrics={"op_pass_rate": {"value": 1.0}})).replace("1.0", "NaN")),
    "hostile names": _json(_with(stage=NASTY)),
    "newer schema": _json(_with(schema="gatekeeper.stage/v999")),
    "naive time": _json(_with(started_at="2026-12-01T10:00:00")),
    "garbled time": _json(_with(started_at="not a time")),
    "unknown status": _json(_with(status="exploded")),
    "op details": _json(_with(checks=[{"name": "x", "status": "failed", "message": "m", "duration_s": 0,
                                       "details": {"op": "os.system", "shapes": "x", "seed": "abc"}}])),
}  # fmt: skip
LOG: dict[str, Callable[[Path], None]] = {
    **{k: v for k, v in GENERIC.items() if k not in ("fifo",)},  # a log may be a pipe on purpose (stdin)
    "control characters": _text(f"{NASTY}\nTraceback (most recent call last):\n\x1b]0;pwned\x07\n"),
    "one long line": _text("E" * (8 * 2**20)),
    "truncated gzip": _truncated_gzip,
}
YAML: dict[str, Callable[[Path], None]] = {
    **GENERIC,
    "alias bomb": _text(
        "".join(f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9) if i else 'a'}]\n" for i in range(10)) + "gates: *x9\n"
    ),
    "python tag": _text("!!python/object/apply:os.system ['touch /tmp/pwned-gatekeeper']\n"),
    "not a mapping": _text("- 1\n- 2\n"),
    "hostile gate": _text(f"version: 1\ngates:\n  - name: {json.dumps(NASTY)}\n    metric: x\n    fail: '>= 1'\n"),
    "bad date": _text("version: 1\ngates: []\nwaivers:\n  - {gate: a, reason: r, owner: o, expires: 2025-13-45}\n"),
    "recursive alias": _text("a: &a [*a]\n"),
}
VERDICT: dict[str, Callable[[Path], None]] = {
    **GENERIC,
    "wrong schema": _json({"schema": "gatekeeper.verdict/v1", "result": 5, "gates": "x"}),
    "hostile gates": _json({"schema": "gatekeeper.verdict/v1", "result": "blocked", "summary": NASTY,
                            "channel": "stable", "gates": [{"name": NASTY, "outcome": "exploded"}]}),
}  # fmt: skip
STATE: dict[str, Callable[[Path], None]] = {
    **GENERIC,
    "naive times": _json({"schema": "gatekeeper.breaker/v1", "channel": "nightly", "job": "perf", "state": "open",
                          "opened_at": "2026-12-01T10:00:00", "probe_started_at": 5, "history": "x"}),
    "wrong fields": _json({"schema": "gatekeeper.breaker/v1", "channel": 1, "job": None, "state": "exploded",
                           "consecutive_failures": "many", "unknown": 1}),
    "alert state": _json({"schema": "gatekeeper.alert_state/v1", "jobs": {"stable:-:gatekeeper": {
        "failing": "yes", "since": 5, "last_alert": "2026-12-01T10:00:00", "runs": "x"}}}),
    "alert jobs list": _json({"schema": "gatekeeper.alert_state/v1", "jobs": {"stable:-:gatekeeper": [1]}}),
}  # fmt: skip
