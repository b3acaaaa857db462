"""Reading and writing files: atomic writes, and readers whose errors name the place.

Every artifact, verdict, baseline and spool file is written through
``atomic_write``: a temp file in the same directory, fsync, then ``os.replace``,
so a crash or a full disk never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gatekeeper.core.errors import InputError

__all__ = [
    "YamlDocument",
    "atomic_write",
    "dates_to_text",
    "loads_strict",
    "parse_json",
    "parse_yaml",
    "read_json",
    "read_text",
    "read_yaml",
    "write_json",
]


def atomic_write(path: str | Path, data: str | bytes, *, redacted: bool = False) -> Path:
    """Write ``data`` whole or not at all; text is passed through the redactor first.

    ``redacted=True``: the caller already redacted (write_json, per string) or
    the bytes are not text; binary data that is not UTF-8 is written as it is.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = _redacted_bytes(data) if not redacted else data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp makes the file 0600; give it the mode a plain open() would (or keep the old file's).
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def _redacted_bytes(data: str | bytes) -> bytes:
    from gatekeeper.core.redact import redact

    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data  # not text: nothing of ours to redact
        return redact(text).encode("utf-8")
    return redact(data).encode("utf-8")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: str | Path, obj: Any) -> Path:
    """Atomic JSON; every string in ``obj`` is redacted (per string, so the document stays valid JSON)."""
    from gatekeeper.core.numbers import finite_or_none
    from gatekeeper.core.redact import redact_obj

    # JSON has no NaN or Infinity, and every reader refuses them (core/numbers.py): a non-finite float is null.
    plain = finite_or_none(json.loads(json.dumps(obj, default=str)))
    text = json.dumps(redact_obj(plain), indent=2, sort_keys=False, allow_nan=False)
    return atomic_write(path, text + "\n", redacted=True)


def read_text(path: str | Path, *, what: str = "file", max_bytes: int | None = None) -> str:
    """A regular file's UTF-8 text, at most ``max_bytes`` (budgets.MAX_JSON_BYTES by default)."""
    from gatekeeper.core import budgets

    path = Path(path)
    cap = budgets.MAX_JSON_BYTES if max_bytes is None else max_bytes
    try:
        return budgets.read_capped(path, max_bytes=cap, what=what).decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            path,
            f"byte {err.start}",
            f"not UTF-8 text: a binary file (or another encoding) where a {what} belongs",
            "pass the file gatekeeper wrote, or rerun the step that wrote it (a binary upload, a gzip or an image "
            "under this name is not one)",
        ) from None
    except OSError as err:
        raise InputError(
            path, "", f"cannot read {what}: {err.strerror}", "check the path and that the job can read it"
        ) from None


class DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """object_pairs_hook: a key given twice in one object is an error, never "the last one wins"."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def loads_strict(text: str) -> Any:
    """json.loads that refuses a key given twice in one object (DuplicateKeyError)."""
    return json.loads(text, object_pairs_hook=_unique_keys)


def read_json(path: str | Path, *, what: str = "JSON file", max_bytes: int | None = None) -> Any:
    """A regular file's JSON (``max_bytes``, by default budgets.MAX_JSON_BYTES, at most), strict: no duplicate
    key, every number bounded (``numbers.check_tree``); InputError naming the file and the place otherwise."""
    return parse_json(read_text(path, what=what, max_bytes=max_bytes), path, what=what)


def parse_json(text: str | bytes, path: str | Path | None, *, what: str = "JSON file") -> Any:
    """JSON text read from ``path`` (or a store row: ``path`` names it), by the same strict rules as ``read_json``."""
    from gatekeeper.core import numbers

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(path, f"byte {err.start}", "not UTF-8 text", "save the file as UTF-8") from None
    doc = _parse_json(text, path, what)
    numbers.check_tree(doc, path)
    return doc


def _parse_json(text: str, path: str | Path | None, what: str) -> Any:
    if not text.strip():
        raise InputError(path, "", f"empty {what}", "rerun the step that wrote it")
    try:
        return loads_strict(text)
    except DuplicateKeyError as err:
        places = _key_places(text, err.key)
        first = f" (first at {places[0]})" if len(places) > 1 else ""
        raise InputError(
            path,
            places[1] if len(places) > 1 else "",
            f"duplicate key {err.key!r}{first}: a reader would silently keep only one",
            "remove one of the two",
        ) from None
    except RecursionError:
        raise InputError(path, "", "JSON nested too deeply", "this is not a file gatekeeper wrote") from None
    except json.JSONDecodeError as err:
        hint = (
            "the file looks truncated; rerun the step that wrote it"
            if err.pos >= len(text.rstrip())
            else "fix the JSON syntax"
        )
        raise InputError(path, f"{err.lineno}:{err.colno}", f"invalid JSON: {err.msg}", hint) from None
    except ValueError as err:  # e.g. an integer of more digits than Python converts
        raise InputError(path, "", f"invalid JSON: {err}", "this is not a file gatekeeper wrote") from None


def _key_places(text: str, key: str) -> list[str]:
    """1-based ``line:column`` of each ``"key":`` in ``text`` (to name both places of a duplicate)."""
    pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    places = []
    for m in pattern.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        places.append(f"{line}:{m.start() - (text.rfind(chr(10), 0, m.start()) + 1) + 1}")
    return places


@dataclass(frozen=True)
class YamlDocument:
    """Parsed YAML plus the node tree, so errors can name line and column."""

    path: str
    data: Any
    root: yaml.Node | None

    def position(self, key_path: Sequence[str | int]) -> str:
        """``line:col`` (1-based) of the deepest node on ``key_path`` that exists."""
        node = self.root
        if node is None:
            return "1:1"
        for key in key_path:
            child = _child(node, key)
            if child is None:
                break
            node = child
        mark = node.start_mark
        return f"{mark.line + 1}:{mark.column + 1}"

    def key_position(self, key_path: Sequence[str | int]) -> str:
        """Position of the *key* of the last element (for unknown-key errors)."""
        node = self.root
        for key in key_path[:-1]:
            node = _child(node, key) if node is not None else None
        if isinstance(node, yaml.MappingNode):
            for k, _v in node.value:
                if k.value == key_path[-1]:
                    return f"{k.start_mark.line + 1}:{k.start_mark.column + 1}"
        return self.position(key_path)


def _child(node: yaml.Node, key: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if str(k.value) == str(key):
                return v
    elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
        return node.value[key]
    return None


def read_yaml(path: str | Path, *, what: str = "YAML file") -> YamlDocument:
    from gatekeeper.core import budgets

    return parse_yaml(read_text(path, what=what, max_bytes=budgets.MAX_YAML_BYTES), path)


def parse_yaml(text: str, path: str | Path) -> YamlDocument:
    """YAML text (read from ``path``, which errors name) as a YamlDocument; a duplicated key is an error."""
    from gatekeeper.core import budgets

    if len(text.encode("utf-8", "replace")) > budgets.MAX_YAML_BYTES:
        raise InputError(path, "", f"larger than {budgets.MAX_YAML_BYTES} bytes", "a gates or matrix file is small")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        budgets.check_yaml_size(root, path)  # before anything expands the aliases
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise InputError(path, where, f"invalid YAML: {err.problem or err.context}", "fix the YAML syntax") from None
    except yaml.YAMLError as err:
        raise InputError(path, "", f"invalid YAML: {err}", "fix the YAML syntax") from None
    except RecursionError:
        raise InputError(path, "", "YAML nested too deeply", "flatten the document") from None
    except ValueError as err:  # e.g. an impossible date such as 2025-13-01
        where, value = _bad_scalar(root)
        raise InputError(path, where, f"invalid value {value!r}: {err}", "write dates as YYYY-MM-DD") from None
    _reject_duplicate_keys(path, root)
    doc = YamlDocument(str(path), data, root)
    from gatekeeper.core import numbers

    numbers.check_tree(data, path, position=doc.position)
    return doc


def _reject_duplicate_keys(path: str | Path, root: yaml.Node | None) -> None:
    """PyYAML keeps the last of two equal keys; a second gate or rule of one name would silently win."""
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, yaml.Node] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value in seen:
                    first = seen[k.value].start_mark
                    raise InputError(
                        path,
                        f"{k.start_mark.line + 1}:{k.start_mark.column + 1}",
                        f"duplicate key {k.value!r} (first at {first.line + 1}:{first.column + 1}): "
                        "only one of them would apply",
                        "remove or rename one",
                    )
                if isinstance(k, yaml.ScalarNode):
                    seen[k.value] = k
                stack.append(v)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def dates_to_text(obj: Any) -> Any:
    """YAML reads an unquoted 2027-01-31 as a date; schemas (and JSON) speak strings."""
    if isinstance(obj, dict):
        return {k: dates_to_text(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [dates_to_text(v) for v in obj]
    if isinstance(obj, dt.date):
        return obj.isoformat()
    return obj


def _bad_scalar(node: yaml.Node | None) -> tuple[str, str]:
    """The first scalar that PyYAML's constructor refuses (its position, its text)."""
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop(0)
        if isinstance(n, yaml.ScalarNode):
            try:
                yaml.SafeLoader("").construct_object(n, deep=True)
            except ValueError:
                return f"{n.start_mark.line + 1}:{n.start_mark.column + 1}", str(n.value)
        elif isinstance(n, yaml.MappingNode):
            stack.extend(v for pair in n.value for v in pair)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
    return "", ""


@contextlib.contextmanager
def staged_outputs(directory: str | Path) -> Iterator[Path]:
    """A temp dir in ``directory``; nothing is published if the block raises."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".staging-", dir=directory) as tmp:
        yield Path(tmp)
        for item in sorted(Path(tmp).iterdir()):
            os.replace(item, directory / item.name)
