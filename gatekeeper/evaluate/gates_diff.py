"""Gates from the target branch: read gates.yaml at a git ref, and name every difference from the
merge request's own copy (rules weakened, gates removed, waivers added), so a merge request cannot
weaken the gates that judge it without the verdict saying so.

The ref must name one commit unambiguously: a fully qualified ref (``refs/remotes/origin/main``,
looked up exactly, with ``git show-ref --verify``) or a full commit SHA. A short name is refused:
git prefers ``refs/tags/origin/main`` to ``refs/remotes/origin/main``, so a merge request that
pushes such a tag would pick its own gates. The file is read from the commit's tree (git objects,
through gitpython as ``history/git.py`` does), never from the work tree; a symlink in that tree is
followed inside the tree, and one that leaves it, dangles or loops is an input error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import git

from gatekeeper.core import budgets
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.gates import Gate, Gates, Rule

__all__ = ["differences", "gates_at_ref", "resolve_gates_ref"]

GIT_TIMEOUT_S = 60  # every git child gitpython starts for a command is killed after this
MAX_LINKS = 8  # symlinks followed inside the tree before it counts as a loop
_FULL_SHA = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")
_ON_MISSING = {"fail": 0, "warn": 1, "skip": 2}  # higher: weaker
_LINK_MODE = 0o120000


def _hint(ref: str) -> str:
    branch = ref.removeprefix("origin/") if not ref.startswith("refs/") else "BRANCH"
    return (
        f"pass a fully qualified ref, e.g. refs/remotes/origin/{branch} after "
        f"git fetch origin +refs/heads/{branch}:refs/remotes/origin/{branch}, or a full commit SHA "
        "(in a merge request: $CI_MERGE_REQUEST_DIFF_BASE_SHA)"
    )


def _repo() -> git.Repo:
    import git  # only when a ref is read: gitpython costs evaluate ~8 MB and 0.1 s at start-up

    try:
        return git.Repo(Path.cwd(), search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise InputError(Path.cwd(), "", "--gates-ref needs a git repository", "run evaluate in the checkout") from None


def resolve_gates_ref(ref: str, repo: git.Repo | None = None) -> str:
    """The full SHA of the commit ``ref`` names: a full SHA or a fully qualified ref, never a short name."""
    import git  # only when a ref is read: gitpython costs evaluate ~8 MB and 0.1 s at start-up

    repo = repo or _repo()
    if _FULL_SHA.fullmatch(ref):
        candidate = ref.lower()
    elif ref.startswith("refs/"):
        try:
            repo.git.check_ref_format(ref, kill_after_timeout=GIT_TIMEOUT_S)
            candidate = repo.git.show_ref("--verify", "--hash", ref, kill_after_timeout=GIT_TIMEOUT_S).strip()
        except git.GitCommandError:
            raise InputError(
                None, "--gates-ref", f"{ref!r} is not a ref in this repository", _hint(ref)
            ) from None  # fmt: skip
    else:
        raise InputError(
            None,
            "--gates-ref",
            f"{ref!r} is not a fully qualified ref (refs/...) or a full commit SHA: a short name is ambiguous "
            f"(a tag named {ref} would win over the branch)",
            _hint(ref),
        )
    try:
        return repo.git.rev_parse(
            "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}", kill_after_timeout=GIT_TIMEOUT_S
        ).strip()
    except git.GitCommandError:
        raise InputError(
            None, "--gates-ref", f"{ref!r} is not a commit in this repository",
            f"fetch it first; {_hint(ref)}",
        ) from None  # fmt: skip


def gates_at_ref(ref: str, path: Path) -> str | None:
    """The text of ``path`` in the tree of the commit ``ref`` names (None when the file does not exist there).

    InputError for an ambiguous or unknown ref, a path outside the repository, and a symlink at the ref that
    leaves the tree, dangles or loops; the work tree is never read."""
    import git  # only when a ref is read: gitpython costs evaluate ~8 MB and 0.1 s at start-up

    repo = _repo()
    sha = resolve_gates_ref(ref, repo)
    rel = _repo_path(repo, path)
    try:
        data = _read_in_tree(repo.commit(sha).tree, rel, ref)
    except (ValueError, git.GitCommandError) as err:
        raise InputError(
            None,
            "--gates-ref",
            f"cannot read {rel} at {ref}: {err}",
            "fetch the target branch first (git fetch origin), or pass a ref this clone has",
        ) from None
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{ref}:{rel}", f"byte {err.start}", "not UTF-8 text", "save the gates file as UTF-8 on that branch"
        ) from None


def _repo_path(repo: git.Repo, path: Path) -> PurePosixPath:
    """``path`` relative to the repository's top, without following any symlink of the work tree."""
    top = Path(repo.working_tree_dir or ".").resolve()
    here = PurePosixPath(os.path.relpath(Path.cwd().resolve(), top))
    given = os.path.normpath(os.path.join(os.path.abspath("."), os.fspath(path)))  # lexical: links are not followed
    rel = PurePosixPath(os.path.normpath(here / os.path.relpath(given, os.path.abspath("."))))
    if rel.parts[:1] == ("..",) or rel.is_absolute() or str(rel) == ".":
        raise InputError(path, "", "--gates-ref needs a gates file inside the repository", "pass --gates ./gates.yaml")
    return rel


def _read_in_tree(root: Any, rel: PurePosixPath, ref: str) -> bytes | None:
    """The bytes of the regular file ``rel`` in the tree ``root``, following symlinks inside that tree."""
    todo = list(rel.parts)
    at: list[str] = []  # the directory we are in, from the top of the tree
    links = 0
    followed: str | None = None  # the first symlink followed, for the error message

    def refuse(problem: str) -> InputError:
        return InputError(None, "--gates-ref", f"{rel} at {ref}: {problem}", "make it a regular file in that branch")

    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            if not at:
                raise refuse(f"the symlink {followed} points outside the repository")
            at.pop()
            continue
        here = root
        for part in at:
            here = here / part
        try:
            item = here / name
        except KeyError:
            if followed is not None:
                raise refuse(
                    f"the symlink {followed} points to {'/'.join([*at, name])}, which {ref} does not have"
                ) from None
            return None
        if item.type == "blob" and item.mode == _LINK_MODE:
            links += 1
            if links > MAX_LINKS:
                raise refuse(f"more than {MAX_LINKS} symlinks (a loop)")
            target = item.data_stream.read(4096).decode("utf-8", "replace")
            followed = followed or "/".join([*at, name])
            if target.startswith("/"):
                raise refuse(f"the symlink {followed} points outside the repository ({target})")
            todo = [*PurePosixPath(target).parts, *todo]
            continue
        if todo:
            if item.type != "tree" and followed is None:
                return None
            if item.type != "tree":
                raise refuse(f"the symlink {followed} leads through {'/'.join([*at, name])}, not a directory there")
            at.append(name)
            continue
        if item.type != "blob":
            raise refuse(f"{'/'.join([*at, name])} is a {item.type}, not a file")
        if item.size > budgets.MAX_YAML_BYTES:
            raise refuse(f"{item.size} bytes, more than {budgets.MAX_YAML_BYTES}")
        data: bytes = item.data_stream.read()
        return data
    raise refuse("names a directory")


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
    out += _channel_changes(target, mine, sorted(theirs.keys() & ours.keys()))
    a, b = target.anchor, mine.anchor
    if a != b:  # a shorter window lets the anchor follow a slow drift
        weaker = b.days < a.days or b.runs < a.runs
        out.append(
            f"anchor window {a.days} days/{a.runs} runs -> {b.days} days/{b.runs} runs"
            + (" (weakened)" if weaker else "")
        )
    return out


def _channel_changes(target: Gates, mine: Gates, names: list[str]) -> list[str]:
    """What the channel overrides change, gate by gate as each channel sees it, beyond the gates' own changes: an
    override that makes a gate advisory on stable is "(weakened)" like the same change to the gate itself."""
    out: list[str] = []
    theirs = {g.name: g for g in target.gates}
    ours = {g.name: g for g in mine.gates}
    for channel in sorted(set(target.channels) | set(mine.channels)):
        a = {g.name: g for g in target.for_channel(channel)}
        b = {g.name: g for g in mine.for_channel(channel)}
        for name in names:
            said = set(_gate_changes(theirs[name], ours[name]))
            out += [f"channel {channel}: gate {name}: {d}" for d in _gate_changes(a[name], b[name]) if d not in said]
    if not out and _plain(target.channels) != _plain(mine.channels):  # no gate reads differently on any channel
        out.append(f"channels overrides changed: {_plain(target.channels)} -> {_plain(mine.channels)}")
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
    if a.max_cv != b.max_cv:  # a noisier run may be judged: it can pass where it was inconclusive
        out.append(f"max_cv {a.max_cv:g} -> {b.max_cv:g}" + (" (weakened)" if b.max_cv > a.max_cv else ""))
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
