"""ROCm version strings: ``/opt/rocm/.info/version`` (alone or inside a pasted
shell session), ``rocm-smi --showdriverversion``/``hipconfig --version`` style
lines, the ROCm build string torch reports (``6.3.42133-1b9c17779``), and the
versions of ROCm libraries found by their shared-object file names."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gatekeeper.machine.probes import integer

__all__ = [
    "LIBRARIES",
    "RocmVersion",
    "family",
    "find_rocm_root",
    "library_versions",
    "parse",
    "parse_build",
    "scan_libraries",
]

# A line that is a version and nothing else: "1.6.180", "6.3.1-48", "6.2.0"
_ALONE = re.compile(r"^\s*(\d+\.\d+(?:\.\d+)?(?:-\w+)?)\s*$")
# "ROCm version: 6.2.0", "HIP version: 6.2.41133-dd7f95766", "ROCM-SMI version: ..."
_LABELLED = re.compile(r"\b(?:ROCm|ROCM|HIP)[ -]?(?:version|Version)\s*[:=]?\s*(\d+\.\d+(?:\.\d+)?(?:-\w+)?)")
# A versioned install prefix in a pasted command line: "/opt/rocm-4.0.0/bin/rocm-smi"
_PREFIX = re.compile(r"/opt/rocm-(\d+\.\d+(?:\.\d+)?)\b")


@dataclass(frozen=True)
class RocmVersion:
    version: str | None  # as written: "1.6.180", "6.3.1-48"
    major: int | None = None
    minor: int | None = None
    patch: int | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def family(self) -> str | None:
        """ "6.3": what ROCm wheel indexes and compatibility tables are keyed by."""
        return None if self.major is None else f"{self.major}.{self.minor}"


def _split(version: str) -> tuple[int | None, int | None, int | None]:
    nums: list[int | None] = [integer(x) for x in re.findall(r"\d+", version.split("-", maxsplit=1)[0])[:3]]
    nums += [None] * (3 - len(nums))
    return nums[0], nums[1], nums[2]


def parse(text: str) -> RocmVersion:
    """The first labelled version line, else the first line that is only a version."""
    candidates: list[str] = []
    for line in text.splitlines():
        m = _LABELLED.search(line)
        if m:
            candidates.insert(0, m.group(1))
            break
        m = _ALONE.match(line) or _PREFIX.search(line)
        if m:
            candidates.append(m.group(1))
    if not candidates:
        return RocmVersion(None, warnings=("no ROCm version line found",))
    version = candidates[0]
    warnings = () if len(candidates) == 1 else (f"several version lines; took {version}",)
    return RocmVersion(version, *_split(version), warnings=warnings)


def parse_build(build: str | None) -> RocmVersion:
    """torch's ``torch.version.hip`` / collect_env's "ROCM used to build": "6.3.42133-1b9c17779"."""
    if not build or not re.match(r"^\d+\.\d+", build.strip()):
        return RocmVersion(None, warnings=(f"not a ROCm build string: {build!r}",) if build else ())
    build = build.strip()
    return RocmVersion(build, *_split(build))


def family(version: str | None) -> str | None:
    return parse_build(version).family if version else None


# library -> shared object stem; the file name carries the version ("librocblas.so.4.3.60300")
LIBRARIES = {
    "rocblas": "librocblas.so",
    "hipblaslt": "libhipblaslt.so",
    "miopen": "libMIOpen.so",
    "hipblas": "libhipblas.so",
    "rccl": "librccl.so",
}


def library_versions(names: Iterable[str]) -> dict[str, str]:
    """The longest version suffix per library among file names (pure: no file system)."""
    out: dict[str, str] = {}
    for name in names:
        for lib, stem in LIBRARIES.items():
            if name.startswith(stem + "."):
                version = name[len(stem) + 1 :]
                if re.fullmatch(r"\d+(?:\.\d+)*", version) and len(version) > len(out.get(lib, "")):
                    out[lib] = version
    return out


def scan_libraries(rocm_root: str | Path) -> dict[str, str]:
    """Versions of the ROCm libraries installed under ``rocm_root/lib`` (empty when none)."""
    lib = Path(rocm_root) / "lib"
    try:
        names = [p.name for p in lib.iterdir()]
    except OSError:
        return {}
    return library_versions(names)


def find_rocm_root(environ: Mapping[str, str]) -> Path | None:
    """The ROCm install: $ROCM_PATH, $ROCM_HOME or /opt/rocm, the first with a .info/version file."""
    for root in filter(None, (environ.get("ROCM_PATH"), environ.get("ROCM_HOME"), "/opt/rocm")):
        if (Path(root) / ".info" / "version").is_file():
            return Path(root)
    return None
