"""gates.yaml: load, validate (one line per error with line:col), and turn into frozen records.

No code below ``load_gates`` sees the raw dict: it gets ``Gates``.
"""

from __future__ import annotations

import datetime as dt
import difflib
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from gatekeeper.contract import schemas
from gatekeeper.contract.metric_points import pattern_error
from gatekeeper.core import budgets, files
from gatekeeper.core.errors import InputError
from gatekeeper.core.numbers import parse_number

__all__ = [
    "AnchorWindow",
    "Condition",
    "Gate",
    "Gates",
    "Rule",
    "Waiver",
    "default_gates_path",
    "load_gates",
    "load_gates_text",
    "parse_gates",
]

GATES_SCHEMA = "gatekeeper.gates/v1"

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "==": operator.eq,
    "!=": operator.ne,
}
_RULE = re.compile(r"^\s*(<=|>=|<|>|==|!=)\s*([+-]?)((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(%?)\s*$")
JUNIT_METRICS = ("pass_rate", "failures", "errors", "tests", "skipped")
_RELATIVE = ("baseline", "anchor", "history")  # compare: kinds a signed (relative) rule may use


@dataclass(frozen=True)
class Rule:
    """``OP NUMBER``; ``relative`` rules compare with the baseline (``<= +20%`` = at most 1.2x)."""

    text: str
    op: str
    number: float  # absolute threshold, or relative change (0.20 for +20%)
    relative: bool

    @classmethod
    def parse(cls, text: str) -> Rule:
        m = _RULE.match(text)
        if not m:
            raise ValueError(f"not a rule: {text!r}")
        op, sign, num, pct = m.groups()
        value = parse_number(num) / (100.0 if pct else 1.0)  # bounded like every number read (core/numbers.py)
        if sign == "-":
            value = -value
        return cls(text.strip(), op, value, relative=bool(sign))

    def threshold(self, baseline: float | None) -> float:
        if not self.relative:
            return self.number
        if baseline is None:
            raise ValueError("a relative rule needs a baseline value")
        return baseline * (1.0 + self.number) if baseline >= 0 else baseline * (1.0 - self.number)

    def holds(self, value: float, baseline: float | None = None) -> bool:
        return _OPS[self.op](value, self.threshold(baseline))

    def describe(self, baseline: float | None = None) -> str:
        if self.relative and baseline is not None:
            return f"{self.op} {self.threshold(baseline):.4g} ({self.text} vs baseline {baseline:.4g})"
        return self.text


@dataclass(frozen=True)
class Condition:
    """``when:``: every listed field must match (values are alternatives)."""

    fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Condition:
        if not d:
            return cls()
        fields = {k: (v,) if isinstance(v, str) else tuple(v) for k, v in d.items() if k != "env"}
        return cls(fields, dict(d.get("env", {})))

    def __bool__(self) -> bool:
        return bool(self.fields or self.env)

    def unmet(self, facts: Mapping[str, str | None], environ: Mapping[str, str]) -> str | None:
        """None when the condition holds, else why not (in words)."""
        for name, allowed in self.fields.items():
            value = facts.get(name)
            if name == "gfx_arch" and value:
                value = value.split(":")[0]
            if value not in allowed:
                return f"applies only when {name} is {' or '.join(allowed)} (this run: {value or 'unknown'})"
        for var, wanted in self.env.items():
            if environ.get(var) != wanted:
                return f"applies only when {var}={wanted} (it is {environ.get(var, 'unset')!r})"
        return None


@dataclass(frozen=True)
class Gate:
    name: str
    metric: str
    pass_rule: Rule
    warn_rule: Rule | None = None
    severity: Literal["blocking", "advisory"] = "blocking"
    on_missing: Literal["fail", "warn", "skip"] = "fail"
    mode: Literal["enforce", "shadow"] = "enforce"
    # baseline: the newest comparable run; anchor: the fixed anchor run (drift); history: the newest
    # unconfirmed change point of the metric's recorded history (gatekeeper.history.changes)
    compare: Literal["baseline", "anchor", "history"] | None = None
    junit: str | None = None
    when: Condition = field(default_factory=Condition)
    alpha: float = 0.01
    min_effect: float | None = None
    max_cv: float = 0.05  # noise guard: a side whose process medians vary more is not judged (inconclusive)
    description: str = ""
    max_skipped: int | None = None  # more skipped checks than this fails the gate
    skip_checks: tuple[str, ...] = ()  # which checks count (globs; empty: all of the stage)

    @property
    def stage(self) -> str | None:
        return None if self.junit else self.metric.split(".", 1)[0]


@dataclass(frozen=True)
class Waiver:
    gate: str
    reason: str
    owner: str
    expires: dt.date
    checks: tuple[str, ...] = ()
    when: Condition = field(default_factory=Condition)
    ticket: str = ""

    def expired(self, today: dt.date) -> bool:
        return today > self.expires

    def to_dict(self) -> dict[str, Any]:
        return {
            "gate": self.gate,
            "reason": self.reason,
            "owner": self.owner,
            "ticket": self.ticket,
            "expires": self.expires.isoformat(),
            "checks": list(self.checks),
        }


@dataclass(frozen=True)
class AnchorWindow:
    """Where ``compare: anchor`` looks when no anchor was set and no release recorded: the oldest of the
    ``runs`` newest runs of the last ``days`` days (gates.yaml ``anchor:``)."""

    days: int = 30
    runs: int = 20


@dataclass(frozen=True)
class Gates:
    gates: tuple[Gate, ...]
    waivers: tuple[Waiver, ...] = ()
    channels: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    source: str = ""
    anchor: AnchorWindow = field(default_factory=AnchorWindow)

    def compares(self, kind: str) -> tuple[Gate, ...]:
        """The gates with ``compare: kind``."""
        return tuple(g for g in self.gates if g.compare == kind)

    def for_channel(self, channel: str) -> tuple[Gate, ...]:
        """The gates with this channel's overrides applied."""
        overrides = self.channels.get(channel, {})
        out = []
        for gate in self.gates:
            o = overrides.get(gate.name)
            if not o:
                out.append(gate)
                continue
            changes: dict[str, Any] = {k: v for k, v in o.items() if k in ("severity", "on_missing", "mode")}
            if "max_cv" in o:  # a channel run on other runners (nightly on shared nodes) may have its own guard
                changes["max_cv"] = float(o["max_cv"])
            if "pass" in o:
                changes["pass_rule"] = Rule.parse(o["pass"])
            if "warn" in o:
                changes["warn_rule"] = Rule.parse(o["warn"])
            out.append(replace(gate, **changes))
        return tuple(out)


def _rule(text: str, path: str, place: str, field: str) -> Rule:
    try:
        return Rule.parse(text)
    except ValueError as err:  # the schema checked the form; the number itself may still be out of range
        raise InputError(path, place, f"{field}: {err}", "write a finite threshold within +-9.2e18") from None


def default_gates_path(explicit: str | Path | None = None, cwd: Path | None = None) -> Path:
    """--gates, else ./gates.yaml when the repository has one, else the defaults shipped in the package."""
    if explicit is not None:
        return Path(explicit)
    local = (cwd or Path.cwd()) / "gates.yaml"
    if local.is_file():
        return Path("gates.yaml") if cwd is None else local
    return Path(str(resources.files("gatekeeper.evaluate").joinpath("default_gates.yaml")))


def load_gates(path: str | Path) -> Gates:
    return load_gates_text(files.read_text(path, what="gates file", max_bytes=budgets.MAX_YAML_BYTES), str(path))


def load_gates_text(text: str, source: str) -> Gates:
    """Gates from YAML text; ``source`` names it in errors (e.g. ``main:gates.yaml``)."""
    doc = files.parse_yaml(text, source)
    return parse_gates(doc.data, path=source, position=doc.position, key_position=doc.key_position)


def parse_gates(
    data: Any,
    *,
    path: str = "gates.yaml",
    position: Callable[[list[Any]], str] | None = None,
    key_position: Callable[[list[Any]], str] | None = None,
) -> Gates:
    data = files.dates_to_text(data)
    if not isinstance(data, dict):
        raise InputError(path, "1:1", "expected a mapping with version: 1 and gates:", "see gates.yaml in the docs")
    _reject_unknown_keys(data, path, key_position or position)
    schemas.validate(GATES_SCHEMA, data, path=path, position=position)
    where = position or (lambda kp: ".".join(map(str, kp)))
    gates = []
    for name, g in data["gates"].items():
        if g.get("junit") is None and "." not in g["metric"]:
            raise InputError(
                path,
                where(["gates", name, "metric"]),
                f"gates.{name}.metric: {g['metric']!r} names no stage",
                "write stage.metric, e.g. functional_test.op_pass_rate",
            )
        bad_point = pattern_error(g["metric"])
        if bad_point:
            raise InputError(
                path,
                where(["gates", name, "metric"]),
                f"gates.{name}.metric: {bad_point}",
                "name a stage metric as STAGE.METRIC (the metric table in README.md)",
            )
        if g.get("junit") is not None and g["metric"] not in JUNIT_METRICS:
            raise InputError(
                path,
                where(["gates", name, "metric"]),
                f"gates.{name}.metric: {g['metric']!r} is not a JUnit metric",
                f"use one of {', '.join(JUNIT_METRICS)}",
            )
        rules = {
            k: _rule(g[k], path, where(["gates", name, k]), f"gates.{name}.{k}") for k in ("pass", "warn") if k in g
        }
        for key, rule in rules.items():
            if rule.relative and g.get("compare") not in _RELATIVE:
                raise InputError(
                    path,
                    where(["gates", name, key]),
                    f"gates.{name}.{key}: {rule.text!r} is relative to a baseline",
                    "add compare: baseline, or drop the sign for an absolute threshold",
                )
            if not rule.relative and g.get("compare") == "history":
                raise InputError(
                    path,
                    where(["gates", name, key]),
                    f"gates.{name}.{key}: compare: history judges a change, so its rule must be relative",
                    'write a signed change, e.g. "<= +1%"',
                )
        gates.append(
            Gate(
                name=name,
                metric=g["metric"],
                pass_rule=rules["pass"],
                warn_rule=rules.get("warn"),
                severity=g.get("severity", "blocking"),
                on_missing=g.get("on_missing", "fail"),
                mode=g.get("mode", "enforce"),
                compare=g.get("compare"),
                junit=g.get("junit"),
                when=Condition.from_dict(g.get("when")),
                alpha=float(g.get("alpha", 0.01)),
                min_effect=g.get("min_effect"),
                max_cv=float(g.get("max_cv", 0.05)),
                description=g.get("description", ""),
                max_skipped=g.get("max_skipped"),
                skip_checks=tuple(g.get("skip_checks", ())),
            )
        )
    names = {g.name for g in gates}
    waivers = []
    for i, w in enumerate(data.get("waivers") or []):
        if w["gate"] not in names:
            raise InputError(
                path,
                where(["waivers", i, "gate"]),
                f"waivers[{i}].gate: no gate named {w['gate']!r}",
                _suggest(w["gate"], names),
            )
        try:
            expires = dt.date.fromisoformat(w["expires"])
        except ValueError:
            raise InputError(
                path,
                where(["waivers", i, "expires"]),
                f"waivers[{i}].expires: {w['expires']!r} is not a date",
                "write YYYY-MM-DD",
            ) from None
        waivers.append(
            Waiver(
                w["gate"],
                w["reason"],
                w["owner"],
                expires,
                tuple(w.get("checks", ())),
                Condition.from_dict(w.get("when")),
                w.get("ticket", ""),
            )
        )
    channels = data.get("channels") or {}
    for channel, overrides in channels.items():
        for gate_name in overrides:
            if gate_name not in names:
                raise InputError(
                    path,
                    where(["channels", channel, gate_name]),
                    f"channels.{channel}: no gate named {gate_name!r}",
                    _suggest(gate_name, names),
                )
            for key in ("pass", "warn"):
                rule_text = overrides[gate_name].get(key)
                place = ["channels", channel, gate_name, key]
                if rule_text and _rule(rule_text, path, where(place), ".".join(place)).relative:
                    gate = next(g for g in gates if g.name == gate_name)
                    if gate.compare not in _RELATIVE:
                        raise InputError(
                            path,
                            where(["channels", channel, gate_name, key]),
                            f"channels.{channel}.{gate_name}.{key}: a relative rule needs a baseline",
                            f"add compare: baseline to gates.{gate_name}",
                        )
    window = data.get("anchor") or {}
    anchor = AnchorWindow(int(window.get("window_days", 30)), int(window.get("window_runs", 20)))
    return Gates(tuple(gates), tuple(waivers), channels, path, anchor)


# Known keys at each level, for "did you mean" on misspellings (a misspelled key
# would otherwise silently disable a gate).
_GATE_KEYS = tuple(schemas.load_schema(GATES_SCHEMA)["$defs"]["gate"]["properties"])
_WAIVER_KEYS = tuple(schemas.load_schema(GATES_SCHEMA)["$defs"]["waiver"]["properties"])
_TOP_KEYS = tuple(schemas.load_schema(GATES_SCHEMA)["properties"])


def _reject_unknown_keys(data: dict[str, Any], path: str, position: Callable[[list[Any]], str] | None) -> None:
    where = position or (lambda kp: ".".join(map(str, kp)))

    def check(mapping: Any, allowed: tuple[str, ...], key_path: list[Any], label: str) -> None:
        if not isinstance(mapping, dict):
            return
        for key in mapping:
            if key not in allowed:
                raise InputError(
                    path, where([*key_path, key]), f"{label}: unknown key {key!r}", _suggest(str(key), allowed)
                )

    check(data, _TOP_KEYS, [], "top level")
    for name, gate in (data.get("gates") or {}).items() if isinstance(data.get("gates"), dict) else ():
        check(gate, _GATE_KEYS, ["gates", name], f"gates.{name}")
    for i, waiver in enumerate(data.get("waivers") or []) if isinstance(data.get("waivers"), list) else ():
        check(waiver, _WAIVER_KEYS, ["waivers", i], f"waivers[{i}]")


def _suggest(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(sorted(choices))}"
