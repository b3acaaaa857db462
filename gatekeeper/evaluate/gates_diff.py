"""Gates from the target branch: read gates.yaml at a git ref, and name every difference from the
merge request's own copy (rules weakened, gates removed, waivers added), so a merge request cannot
weaken the gates that judge it without the verdict saying so."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gatekeeper.core import proc
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.gates import Gate, Gates, Rule

__all__ = ["differences", "gates_at_ref"]

GIT_TIMEOUT_S = 60
_ON_MISSING = {"fail": 0, "warn": 1, "skip": 2}  # higher: weaker


def gates_at_ref(ref: str, path: Path) -> str | None:
    """The text of ``path`` at git ``ref`` (None when the file does not exist there); InputError for a bad ref."""
    rel = os.path.relpath(Path(path).resolve(), Path.cwd().resolve())
    if rel.startswith(".."):
        raise InputError(path, "", "--gates-ref needs a gates file inside the repository", "pass --gates ./gates.yaml")
    known = proc.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], timeout=GIT_TIMEOUT_S)
    if not known.ok:
        raise InputError(
            None,
            "--gates-ref",
            f"{ref!r} is not a commit in this repository ({known.stderr.strip() or known.describe()})",
            f"fetch it first, e.g. git fetch --depth 1 origin {ref.removeprefix('origin/')}",
        )
    shown = proc.run(["git", "show", f"{ref}:./{rel}"], timeout=GIT_TIMEOUT_S)
    if shown.ok:
        return shown.stdout
    exists = proc.run(["git", "cat-file", "-e", f"{ref}:./{rel}"], timeout=GIT_TIMEOUT_S)
    if exists.returncode not in (0, None):
        return None
    raise InputError(None, "--gates-ref", f"cannot read {rel} at {ref}: {shown.stderr.strip() or shown.describe()}")


def differences(target: Gates, mine: Gates, *, ref: str) -> list[str]:
    """Every way ``mine`` differs from ``target`` (the gates of ``ref``), one line each; "(weakened)" where it is."""
    out: list[str] = []
    theirs = {g.name: g for g in target.gates}
    ours = {g.name: g for g in mine.gates}
    for name, gate in theirs.items():
        if name not in ours:
            out.append(f"gate {name}: removed (weakened)")
            continue
        out += [f"gate {name}: {d}" for d in _gate_changes(gate, ours[name])]
    out += [f"gate {name}: added (applies once merged into {ref})" for name in ours if name not in theirs]
    before = {_waiver_key(w) for w in target.waivers}
    after = {_waiver_key(w) for w in mine.waivers}
    for w in mine.waivers:
        if _waiver_key(w) not in before:
            checks = f" checks {', '.join(w.checks)}" if w.checks else ""
            out.append(
                f"waiver added for gate {w.gate}{checks} (owner {w.owner}, until {w.expires}): {w.reason} (weakened)"
            )
    out += [f"waiver removed for gate {w.gate} ({w.owner})" for w in target.waivers if _waiver_key(w) not in after]
    if _plain(target.channels) != _plain(mine.channels):
        out.append(f"channels overrides changed: {_plain(target.channels)} -> {_plain(mine.channels)}")
    a, b = target.anchor, mine.anchor
    if a != b:  # a shorter window lets the anchor follow a slow drift
        weaker = b.days < a.days or b.runs < a.runs
        out.append(
            f"anchor window {a.days} days/{a.runs} runs -> {b.days} days/{b.runs} runs"
            + (" (weakened)" if weaker else "")
        )
    return out


def _gate_changes(a: Gate, b: Gate) -> list[str]:
    out = []
    for label, ra, rb in (("pass", a.pass_rule, b.pass_rule), ("warn", a.warn_rule, b.warn_rule)):
        if _rule_text(ra) != _rule_text(rb):
            weaker = _rule_weaker(ra, rb) or (label == "warn" and ra is None)
            out.append(f"{label} {_rule_text(ra)} -> {_rule_text(rb)}" + (" (weakened)" if weaker else ""))
    if a.severity != b.severity:
        out.append(f"severity {a.severity} -> {b.severity}" + (" (weakened)" if b.severity == "advisory" else ""))
    if a.mode != b.mode:
        out.append(f"mode {a.mode} -> {b.mode}" + (" (weakened)" if b.mode == "shadow" else ""))
    if a.on_missing != b.on_missing:
        weaker = _ON_MISSING[b.on_missing] > _ON_MISSING[a.on_missing]
        out.append(f"on_missing {a.on_missing} -> {b.on_missing}" + (" (weakened)" if weaker else ""))
    if a.max_skipped != b.max_skipped:
        weaker = a.max_skipped is not None and (b.max_skipped is None or b.max_skipped > a.max_skipped)
        shown = "none" if b.max_skipped is None else b.max_skipped
        out.append(f"max_skipped {_none(a.max_skipped)} -> {shown}" + (" (weakened)" if weaker else ""))
    if a.alpha != b.alpha:
        out.append(f"alpha {a.alpha} -> {b.alpha}" + (" (weakened)" if b.alpha < a.alpha else ""))
    if a.min_effect != b.min_effect:
        weaker = b.min_effect is not None and (a.min_effect is None or b.min_effect > a.min_effect)
        out.append(f"min_effect {_none(a.min_effect)} -> {_none(b.min_effect)}" + (" (weakened)" if weaker else ""))
    for field in ("metric", "junit", "compare", "skip_checks"):
        if getattr(a, field) != getattr(b, field):
            out.append(f"{field} {_none(getattr(a, field))} -> {_none(getattr(b, field))}")
    if _plain(a.when) != _plain(b.when):
        out.append(f"when {_plain(a.when) or 'always'} -> {_plain(b.when) or 'always'}")
    return out


def _rule_weaker(a: Rule | None, b: Rule | None) -> bool:
    """``b`` lets through what ``a`` refused (same operator direction, a looser number), or drops the rule."""
    if a is None or b is None:
        return a is not None and b is None
    if a.relative != b.relative:
        return False
    up = {">=": 1, ">": 1, "<=": -1, "<": -1}
    if a.op not in up or b.op not in up or up[a.op] != up[b.op]:
        return False
    if a.number == b.number:
        return a.op in (">", "<") and b.op in (">=", "<=")
    return (b.number < a.number) if up[a.op] == 1 else (b.number > a.number)


def _rule_text(rule: Rule | None) -> str:
    return rule.text if rule is not None else "none"


def _none(value: Any) -> Any:
    return "none" if value is None or value == () else value


def _waiver_key(w: Any) -> tuple[Any, ...]:
    return (w.gate, w.reason, w.owner, w.expires, w.checks, w.ticket, repr(_plain(w.when)))


def _plain(value: Any) -> Any:
    """A comparable, printable form of mappings, tuples and Conditions."""
    if hasattr(value, "fields") and hasattr(value, "env"):
        return _plain({**dict(value.fields), **({"env": dict(value.env)} if value.env else {})})
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
