"""``--provider image``: tags of one container image (``--image REPOSITORY``), run with docker or podman.

The candidates are the tags listed in ``--tags-file FILE`` (one a line, oldest
first; the order is the file's), else the repository's tags the engine has
locally, in version order (``rocm6.2-20250301`` before ``rocm6.2-20250310``).
Each candidate is pulled when the engine does not have it (a pull that fails
skips it, named), inspected (digest, labels, environment) and asked for its
Python packages; what changed between the last good and the first bad is those
three differences.

A stage or a command runs in a fresh container of the candidate (``run --rm``)
with the working directory mounted at ``/work`` and the output directory at
``/gatekeeper-out``, as the calling user, with the device flags of ``--gpu``
(``rocm``: ``/dev/kfd`` and ``/dev/dri`` with the video and render groups;
``cuda``: ``--gpus all``; ``auto``: whichever device files this machine has).
With ``--stage`` the image must have gatekeeper installed (the images of
``make image`` do): the stage is ``python -m gatekeeper stage`` inside it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gatekeeper.bisect.providers.base import OUT, Candidate, Invocation, Prepared, Unavailable
from gatekeeper.core import files, proc
from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import shell
from gatekeeper.core.redact import is_secret_name

__all__ = ["ENGINES", "ImageProvider", "version_key"]

ENGINES = ("docker", "podman")
PULL_TIMEOUT_S = 3600.0
INSPECT_TIMEOUT_S = 120.0
CONTAINER_OUT = "/gatekeeper-out"
CONTAINER_WORK = "/work"
REPOSITORY = re.compile(r"^[a-z0-9]+([._/:-][a-z0-9]+)*$")  # registry host[:port]/path, lower case
TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_GPU_FLAGS = {
    "rocm": (
        "--device=/dev/kfd",
        "--device=/dev/dri",
        "--group-add=video",
        "--group-add=render",
        "--security-opt=seccomp=unconfined",
    ),
    "cuda": ("--gpus=all",),
    "none": (),
}
MAX_TAGS = 5000


def version_key(tag: str) -> tuple[Any, ...]:
    """Natural order: numbers compare as numbers (``2.10`` after ``2.9``), text as text."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", tag) if p)


class ImageProvider:
    name = "image"

    def __init__(
        self,
        *,
        image: str | None,
        engine: str | None = None,
        tags_file: str | None = None,
        gpu: str = "auto",
        workdir: str | Path = ".",
    ) -> None:
        if not image:
            raise InputError(
                None, "--image", "--provider image needs the image repository", "e.g. --image rocm/pytorch"
            )
        if not REPOSITORY.fullmatch(image):
            raise InputError(None, "--image", f"{image!r} is not an image repository", "e.g. --image rocm/pytorch")
        if engine is not None and engine not in ENGINES:
            raise InputError(None, "--engine", f"{engine!r} is not a container engine", "use docker or podman")
        if gpu not in ("auto", *_GPU_FLAGS):
            raise InputError(None, "--gpu", f"{gpu!r} is not a device kind", "use auto, rocm, cuda or none")
        self.image = image
        self.engine = engine
        self.tags_file = tags_file
        self.gpu = gpu
        self.workdir = Path(workdir).resolve()

    def options(self) -> dict[str, str | None]:
        return {"image": self.image, "engine": self.engine, "tags_file": self.tags_file, "gpu": self.gpu}

    # ------------------------------------------------------------------ tools

    def _engine(self) -> str:
        if self.engine:
            if shutil.which(self.engine) is None:
                raise InputError(
                    None,
                    "--engine",
                    f"{self.engine} is not installed",
                    f"install {self.engine}, or use the other engine",
                )
            return self.engine
        for name in ENGINES:
            if shutil.which(name):
                return name
        raise InputError(
            None,
            "--provider image",
            "neither docker nor podman is installed",
            "install one of them (apt-get install podman), or bisect on a machine with a container engine",
        )

    def check_tools(self) -> None:
        engine = self._engine()
        res = proc.run([engine, "info", "--format", "{{json .}}"], timeout=60)
        if not res.ok:
            why = _last_line(res.stderr or res.stdout) or res.describe()
            raise InputError(
                None,
                "--provider image",
                f"{engine} is installed but its engine does not answer: {why}",
                f"start it (systemctl start {engine}) or pick the other engine with --engine",
            )
        self.engine = engine

    # ------------------------------------------------------------------ candidates

    def _split(self, given: str, option: str) -> str:
        tag = given
        if ":" in given.rsplit("/", 1)[-1]:
            repo, _, tag = given.rpartition(":")
            if repo != self.image:
                raise InputError(None, option, f"{given!r} is not a tag of --image {self.image}", "give the tag only")
        if not TAG.fullmatch(tag):
            raise InputError(None, option, f"{tag!r} is not an image tag", "e.g. rocm6.2-20250301")
        return tag

    def tags(self) -> list[str]:
        if self.tags_file:
            from gatekeeper.core import files

            text = files.read_text(self.tags_file, what="tags file", max_bytes=1 << 20)
            tags = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
            for n, tag in enumerate(tags, 1):
                if not TAG.fullmatch(tag):
                    raise InputError(self.tags_file, str(n), f"{tag!r} is not an image tag", "one tag per line")
            return tags[:MAX_TAGS]
        engine = self.engine or self._engine()
        res = proc.run([engine, "image", "ls", self.image, "--format", "{{.Tag}}"], timeout=INSPECT_TIMEOUT_S)
        if not res.ok:
            raise InputError(
                None,
                "--image",
                f"{engine} image ls {self.image} failed: {_last_line(res.stderr)}",
                "pull the tags first, or list them in --tags-file",
            )
        local = {t.strip() for t in res.stdout.splitlines() if TAG.fullmatch(t.strip())}
        return sorted(local, key=version_key)[:MAX_TAGS]

    def candidates(self, good: str, bad: str) -> list[Candidate]:
        g, b = self._split(good, "--good"), self._split(bad, "--bad")
        if g == b:
            raise InputError(
                None,
                "--good",
                f"{good!r} and --bad {bad!r} are the same tag: the range is empty",
                "give the last tag known to be good as --good",
            )
        tags = self.tags()
        where = "--tags-file" if self.tags_file else f"the local tags of {self.image}"
        for tag, option in ((g, "--good"), (b, "--bad")):
            if tag not in tags:
                raise InputError(None, option, f"tag {tag!r} is not in {where}", "add it to --tags-file, or pull it")
        i, j = tags.index(g), tags.index(b)
        if i > j:
            raise InputError(None, "--good", f"{g!r} is not older than --bad {b!r} in {where}", "swap them")
        return [Candidate(k, f"{self.image}:{t}", t, {"tag": t}) for k, t in enumerate(tags[i : j + 1])]

    # ------------------------------------------------------------------ environments

    def gpu_flags(self) -> tuple[str, ...]:
        kind = self.gpu
        if kind == "auto":
            kind = "rocm" if Path("/dev/kfd").exists() else "cuda" if Path("/dev/nvidiactl").exists() else "none"
        return _GPU_FLAGS[kind]

    def container(self, candidate: Candidate, facts: dict[str, Any] | None = None) -> ContainerPrepared:
        """The prepared environment for an image the engine has (no engine call: rendering only)."""
        engine = self.engine or self._engine()
        return ContainerPrepared(
            candidate,
            self.workdir,
            {},
            ("python",),
            facts or {},
            candidate.ref,
            engine=engine,
            gpu_flags=self.gpu_flags(),
        )

    def prepare(self, candidate: Candidate, workdir: Path) -> Prepared:
        engine = self.engine or self._engine()
        have = proc.run([engine, "image", "inspect", candidate.ref], timeout=INSPECT_TIMEOUT_S)
        if not have.ok:
            pulled = proc.run([engine, "pull", candidate.ref], timeout=PULL_TIMEOUT_S)
            if not pulled.ok:
                raise Unavailable(
                    f"{engine} pull {candidate.ref} failed: {_last_line(pulled.stderr) or pulled.describe()}"
                )
            have = proc.run([engine, "image", "inspect", candidate.ref], timeout=INSPECT_TIMEOUT_S)
        facts = inspect_facts(have.stdout)
        packages = proc.run(
            [engine, "run", "--rm", "--entrypoint", "python", candidate.ref, "-m", "pip", "list", "--format", "json"],
            timeout=INSPECT_TIMEOUT_S,
        )
        try:  # printed by pip inside the candidate image
            listed = (
                files.parse_json(packages.stdout, "pip list output", what="pip list output") if packages.ok else None
            )
            facts["packages"] = {str(p["name"]).lower(): str(p["version"]) for p in listed or []}
        except (InputError, TypeError, KeyError):
            facts["packages"] = {}
        if not packages.ok:
            facts["packages_error"] = f"pip list in the image {packages.describe()}"
        return self.container(candidate, facts)

    def cleanup(self, prepared: Prepared) -> None:
        return None  # run --rm: nothing left behind; the image stays for the next bisection

    def changes(self, last_good: Candidate, first_bad: Candidate, facts: Mapping[int, Mapping[str, Any]]) -> dict:
        a, b = facts.get(last_good.index, {}), facts.get(first_bad.index, {})

        def diff(key: str) -> dict[str, dict[str, Any]]:
            x, y = dict(a.get(key) or {}), dict(b.get(key) or {})
            return {k: {"from": x.get(k), "to": y.get(k)} for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)}

        return {
            "kind": "images",
            "from": last_good.ref,
            "to": first_bad.ref,
            "digests": {"from": a.get("digest"), "to": b.get("digest")},
            "labels": diff("labels"),
            "env": diff("env"),
            "packages": diff("packages"),
        }

    def repro_steps(self, candidate: Candidate) -> list[str]:
        engine = self.engine or "docker"
        return [f"{engine} pull {shell(candidate.ref)}"]


class ContainerPrepared(Prepared):
    """A candidate image: every argv runs in a fresh container of it."""

    def __init__(self, *args: Any, engine: str, gpu_flags: Sequence[str]) -> None:
        super().__init__(*args)
        self.engine = engine
        self.gpu_flags = tuple(gpu_flags)

    def render(self, argv: Sequence[str], out: Path, *, python: bool = False) -> Invocation:
        inner = [CONTAINER_OUT if a == OUT else a for a in argv]
        label = self.candidate.label
        head = [
            self.engine,
            "run",
            "--rm",
            f"--user={os.getuid()}:{os.getgid()}",
            "--env=HOME=/tmp",
            f"--env=GATEKEEPER_BISECT_CANDIDATE={label}",
            *self.gpu_flags,
            f"--volume={self.cwd}:{CONTAINER_WORK}",
            f"--volume={out}:{CONTAINER_OUT}",
            f"--workdir={CONTAINER_WORK}",
        ]
        if python:
            head += ["--entrypoint", "python", str(self.handle), *inner]
        else:
            head += [str(self.handle), *inner]
        return Invocation(tuple(head), dict(os.environ), self.cwd)


_ENV_KEEP = re.compile(r"(VERSION|ROCM|HIP|CUDA|TORCH|PYTORCH|MIOPEN|RCCL|NCCL|HSA|PYTHON)", re.IGNORECASE)


def inspect_facts(text: str) -> dict[str, Any]:
    """Digest, labels and stack-related environment of ``<engine> image inspect`` output."""
    try:  # the engine's output about a candidate image: the strict reader (depth, duplicate keys, numbers)
        doc = files.parse_json(text, "image inspect output", what="image inspect output")
        item = doc[0] if isinstance(doc, list) and doc and isinstance(doc[0], dict) else {}
    except InputError:
        item = {}
    config = item.get("Config") or {}
    env = {}
    for entry in config.get("Env") or []:
        name, _, value = str(entry).partition("=")
        if _ENV_KEEP.search(name) and not is_secret_name(name):
            env[name] = value[:200]
    digests = [str(d) for d in item.get("RepoDigests") or []]
    return {
        "id": str(item.get("Id") or ""),
        "digest": digests[0] if digests else str(item.get("Id") or "") or None,
        "labels": {str(k): str(v)[:200] for k, v in (config.get("Labels") or {}).items()},
        "env": env,
        "created": str(item.get("Created") or ""),
    }


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
