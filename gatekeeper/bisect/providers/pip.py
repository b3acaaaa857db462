"""``--provider pip``: the versions of one package (``--package``), each in a throwaway venv.

Versions come from ``--index-url URL`` or ``--find-links DIR`` (``pip index
versions``, so only versions installable on this Python and platform count),
ordered by version (PEP 440: ``2.7.0.dev20250301`` before ``2.7.0.dev20250302``).

Each candidate gets a venv that inherits nothing from the job's: made with
``python -m venv --without-pip`` (no ensurepip: seconds instead of many, and
no bundled setuptools in the way; benchmarks/bisect_venv.py) and filled by the
job's own pip through ``pip --python``, with ``--isolated`` and
``XDG_CONFIG_DIRS`` pointing at an empty directory: no user or XDG pip.conf and
no ``PIP_*`` variable (a machine's constraints or extra indexes) applies, only
the index or directory given to bisect (``/etc/pip.conf``, which pip always
reads, is the one exception).

**The torch floor rules hold.** pip must never pick a torch for the venv (from a
public index that is a multi-GB CUDA build). Unless the package under test *is*
torch, the job's torch and its own requirements are made visible to the venv
explicitly: each distribution's top-level entries (from its RECORD) are linked
into a directory outside the venv, which one ``.pth`` file in the venv puts on
``sys.path`` after the venv's own site-packages, and ``torch==<the job's
version>`` is a constraint of every install. A candidate that needs another
torch cannot be installed and is skipped with pip's reason. pip never removes a
linked distribution: it lies outside the venv, and pip uninstalls nothing
outside the environment it installs into (it installs a different version of a
non-torch requirement into the venv instead, which then comes first). When the
package under test is torch (nightlies), the candidate's torch is installed from
the index given, which must be the one of the device's flavour (the ROCm or CPU
nightly index), as for the CI template's nightly channel.

With ``--stage``, gatekeeper itself and its requirements are linked the same way
so the stage runs on the venv's Python.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from gatekeeper.bisect.providers.base import Candidate, Prepared, Unavailable, clean_env
from gatekeeper.core import proc
from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import shell

__all__ = ["PipProvider", "linked_closure"]

PIP_TIMEOUT_S = 1800.0  # a torch wheel of several GB on a slow mirror
LIST_TIMEOUT_S = 300.0
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_GATEKEEPER_DIST = "gatekeeper-rocm"


class PipProvider:
    name = "pip"

    def __init__(
        self,
        *,
        package: str | None,
        index_url: str | None = None,
        find_links: str | None = None,
        with_gatekeeper: bool = False,
    ) -> None:
        if not package:
            raise InputError(None, "--package", "--provider pip needs the package to bisect", "e.g. --package torch")
        if not _NAME.fullmatch(package):
            raise InputError(None, "--package", f"{package!r} is not a package name", "e.g. --package torch")
        if bool(index_url) == bool(find_links):
            raise InputError(
                None,
                "--index-url",
                "--provider pip needs exactly one of --index-url URL and --find-links DIR",
                "e.g. --index-url https://download.pytorch.org/whl/nightly/rocm6.2",
            )
        if find_links and not Path(find_links).is_dir():
            raise InputError(find_links, "", "--find-links is not a directory", "give the directory of the wheels")
        if canonicalize_name(package) == "torch" and index_url and _is_pypi(index_url):
            raise InputError(
                None,
                "--index-url",
                "the torch wheels of PyPI are CUDA builds of several GB: never for a bisection venv",
                "give the index of the device's flavour, e.g. https://download.pytorch.org/whl/nightly/rocm6.2",
            )
        self.package = package
        self.key = canonicalize_name(package)
        self.index_url = index_url
        self.find_links = str(Path(find_links).resolve()) if find_links else None
        self.with_gatekeeper = with_gatekeeper
        self._links: Path | None = None
        self._pinned: dict[str, str] = {}
        self._no_config: Path | None = None

    def options(self) -> dict[str, str | None]:
        return {"package": self.package, "index_url": self.index_url, "find_links": self.find_links}

    def _source(self) -> list[str]:
        return (
            ["--index-url", str(self.index_url)]
            if self.index_url
            else ["--no-index", "--find-links", str(self.find_links)]
        )

    def _pip(self) -> list[str]:
        return [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check", "--no-input"]

    def _pip_env(self) -> dict[str, str]:
        """No PIP_* variable, and no XDG site configuration: --isolated alone still reads /etc/xdg/pip/pip.conf."""
        if self._no_config is None:
            import atexit
            import tempfile

            # private (0700) and empty: a shared fixed path in /tmp could be given a pip.conf by someone else
            self._no_config = Path(tempfile.mkdtemp(prefix="gatekeeper-pip-noconfig-"))
            atexit.register(shutil.rmtree, self._no_config, True)
        return clean_env({"XDG_CONFIG_DIRS": str(self._no_config)}, drop=_pip_variables())

    def check_tools(self) -> None:
        res = proc.run([*self._pip(), "--version"], timeout=60, env=self._pip_env())
        if not res.ok:
            raise InputError(
                None,
                "--provider pip",
                f"pip is not usable in this Python ({res.describe()})",
                f"install pip for {sys.executable} (python -m ensurepip)",
            )
        major = _version_tuple(res.stdout.split()[1] if len(res.stdout.split()) > 1 else "0")
        if major < (22, 3):
            raise InputError(
                None,
                "--provider pip",
                f"pip {res.stdout.split()[1]} has no --python option",
                "upgrade pip to 22.3 or newer",
            )

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        g, b = _parse(good, "--good"), _parse(bad, "--bad")
        if g == b:
            raise InputError(
                None,
                "--good",
                f"{good!r} and --bad {bad!r} are the same version: the range is empty",
                "give the last version known to be good as --good",
            )
        if g > b:
            raise InputError(None, "--good", f"{good!r} is not older than --bad {bad!r}", "swap them")
        res = proc.run(
            [*self._pip(), "index", "versions", self.package, "--pre", *self._source()],
            timeout=LIST_TIMEOUT_S,
            env=self._pip_env(),
        )
        line = next((x for x in res.stdout.splitlines() if x.startswith("Available versions:")), None)
        if not res.ok or line is None:
            why = _last_line(res.stderr or res.stdout) or res.describe()
            raise InputError(
                None,
                "--package",
                f"no versions of {self.package} found: {why}",
                "check --package and --index-url/--find-links",
            )
        versions: dict[Version, str] = {}
        for text in line.split(":", 1)[1].split(","):
            try:
                versions.setdefault(Version(text.strip()), text.strip())
            except InvalidVersion:
                continue
        for want, option, given in ((g, "--good", good), (b, "--bad", bad)):
            if want not in versions:
                raise InputError(
                    None,
                    option,
                    f"{self.package} {given} is not among the {len(versions)} versions found",
                    "pick a version pip index versions lists for this Python and platform",
                )
        ordered = sorted(v for v in versions if g <= v <= b)
        return [Candidate(i, versions[v], versions[v], {"package": self.package}) for i, v in enumerate(ordered)]

    # ------------------------------------------------------------------ environments

    def _linked(self, workdir: Path) -> Path | None:
        """The directory of the job's distributions every venv sees (made once per bisection)."""
        if self._links is not None:
            return self._links
        roots = [] if self.key == "torch" else ["torch"]
        if self.with_gatekeeper:
            roots.append(_GATEKEEPER_DIST)
        if not roots:
            return None
        dists = linked_closure(roots, exclude={self.key})
        links = workdir / "job-links"
        links.mkdir(parents=True, exist_ok=True)
        for dist in dists.values():
            for entry in _top_level(dist):
                target = links / entry.name
                if not target.exists() and not target.is_symlink():
                    target.symlink_to(entry)
        self._pinned = {name: str(d.version) for name, d in dists.items() if name == "torch"}
        self._links = links
        return links

    def prepare(self, candidate: Candidate, workdir: Path) -> Prepared:
        venv = workdir / f"venv-{candidate.index:04d}"
        if venv.exists():
            shutil.rmtree(venv)
        made = proc.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=300)
        if not made.ok:
            raise Unavailable(f"python -m venv failed: {_last_line(made.stderr) or made.describe()}")
        python = venv / "bin" / "python"
        site = _site_packages(python)
        links = self._linked(workdir)
        if links is not None:
            (site / "_gatekeeper_job_links.pth").write_text(str(links) + "\n", encoding="utf-8")
        argv = [*self._pip(), "--python", str(python), "install", "--quiet", *self._source()]
        if self._pinned:
            constraints = workdir / "constraints.txt"
            constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(self._pinned.items())), encoding="utf-8")
            argv += ["--constraint", str(constraints)]
        argv.append(f"{self.package}=={candidate.ref}")
        res = proc.run(argv, timeout=PIP_TIMEOUT_S, env=self._pip_env())
        if not res.ok:
            shutil.rmtree(venv, ignore_errors=True)
            raise Unavailable(f"pip install {self.package}=={candidate.ref} failed: {_pip_reason(res)}")
        env = clean_env(
            {
                "VIRTUAL_ENV": str(venv),
                "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                "PYTHONNOUSERSITE": "1",
            },
            drop=("PYTHONPATH", "PYTHONHOME", *_pip_variables()),
        )
        facts = {"installed": _installed(site), "linked": _linked_versions(links)}
        return Prepared(candidate, Path.cwd(), env, (str(python),), facts, venv)

    def cleanup(self, prepared: Prepared) -> None:
        shutil.rmtree(Path(prepared.handle), ignore_errors=True)

    def changes(self, last_good: Candidate, first_bad: Candidate, facts: Mapping[int, Mapping[str, Any]]) -> dict:
        before = dict(facts.get(last_good.index, {}).get("installed", {}))
        after = dict(facts.get(first_bad.index, {}).get("installed", {}))
        diff = {
            name: {"from": before.get(name), "to": after.get(name)}
            for name in sorted(set(before) | set(after))
            if before.get(name) != after.get(name)
        }
        return {
            "kind": "versions",
            "package": self.package,
            "from": last_good.ref,
            "to": first_bad.ref,
            "installed": diff,
            "source": self.index_url or self.find_links,
        }

    def repro_steps(self, candidate: Candidate) -> list[str]:
        source = " ".join(shell(a) for a in self._source())
        torch = self._pinned.get("torch")
        lines = ["python -m venv --without-pip repro-venv"]
        if torch:
            lines.append(f"# the job's torch {torch} was made visible to the venv; installing it from the same source")
            lines.append(f"python -m pip --python repro-venv/bin/python install {source} {shell('torch==' + torch)}")
        spec = shell(f"{self.package}=={candidate.ref}")
        lines += [f"python -m pip --python repro-venv/bin/python install {source} {spec}", ". repro-venv/bin/activate"]
        return lines


def _pip_variables() -> tuple[str, ...]:
    """PIP_* settings of the job: --isolated ignores them, and the venv's commands do not see them either."""
    return tuple(k for k in os.environ if k.startswith("PIP_"))


def linked_closure(roots: Iterable[str], *, exclude: Iterable[str] = ()) -> dict[str, md.Distribution]:
    """The installed distributions ``roots`` need (their requirements, recursively, without extras)."""
    skip = {canonicalize_name(x) for x in exclude}
    seen: dict[str, md.Distribution] = {}
    todo = [canonicalize_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen or name in skip:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = dist
        for text in dist.requires or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def _top_level(dist: md.Distribution) -> list[Path]:
    """The paths a distribution put into its site-packages (packages, modules, its .dist-info)."""
    base = Path(str(dist.locate_file("")))
    names = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    names.discard("__pycache__")
    out = [base / n for n in sorted(names) if not n.endswith(".pth") and (base / n).exists()]
    # An editable install (a .pth or finder pointing at a checkout): link the packages where they really are.
    if canonicalize_name(dist.metadata["Name"] or "") == _GATEKEEPER_DIST:
        import gatekeeper

        root = Path(gatekeeper.__file__).resolve().parents[1]
        out = [p for p in out if p.name.endswith(".dist-info")] + [root / "gatekeeper", root / "stages"]
    return out


def _site_packages(python: Path) -> Path:
    lib = python.parent.parent / "lib"
    found = sorted(lib.glob("python3*/site-packages"))
    if not found:
        raise Unavailable(f"the venv at {python.parent.parent} has no site-packages")
    return found[0]


def _installed(site: Path) -> dict[str, str]:
    out = {}
    for info in site.glob("*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        out[str(canonicalize_name(name))] = version
    return dict(sorted(out.items()))


def _linked_versions(links: Path | None) -> dict[str, str]:
    return _installed(links) if links is not None else {}


def _is_pypi(url: str) -> bool:
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    return host in ("pypi.org", "pypi.python.org", "files.pythonhosted.org") or host.endswith(".pypi.org")


def _parse(text: str, option: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise InputError(None, option, f"{text!r} is not a version", "e.g. 2.7.0.dev20250301 or 1.4.2") from None


def _version_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(Version(text).release[:2])
    except InvalidVersion:
        return (0,)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _pip_reason(res: proc.ProcResult) -> str:
    errors = [line.strip() for line in (res.stderr or "").splitlines() if line.strip().startswith("ERROR:")]
    return (errors[0][:300] if errors else _last_line(res.stderr or res.stdout)) or res.describe()
