"""Will the torch build run on this GPU? Predicted from names, before any kernel.

AMD: the device's gfx target (``gfx90a:sramecc+:xnack-``, what ``gcnArchName``
and rocminfo report) against ``torch.cuda.get_arch_list()``. A code object
runs when its processor matches (``HSA_OVERRIDE_GFX_VERSION`` changes the one
the runtime asks for) and each feature it *pins* (``xnack+``/``xnack-``,
``sramecc±``) equals the device's; a code object that leaves a feature unset
("any") runs either way. Generic targets (``gfx11-generic``) cover their
family. NVIDIA: SASS ``sm_XY`` runs on compute capability X.Z with Z >= Y
(``sm_XYa`` only on X.Y exactly); PTX ``compute_XY`` is JIT-compiled for any
CC >= X.Y. A mismatch comes back with the exact remediation. No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "KNOWN_CHIPS",
    "ArchResult",
    "GfxTarget",
    "check_cuda",
    "check_rocm",
    "code_object_runs_on",
    "override_target",
]

# PCI device id -> native gfx processor, for chips seen in the captured outputs
# (shared/fixtures/env) and a few common Instinct parts. Used only to notice an
# override: rocminfo names the overridden target, the chip id stays native.
KNOWN_CHIPS: Mapping[str, str] = {
    "0x6860": "gfx900",  # Vega 10 / MI25
    "0x66a1": "gfx906",  # Vega 20 / MI50, MI60
    "0x738c": "gfx908",  # MI100
    "0x7408": "gfx90a",  # MI250X
    "0x740c": "gfx90a",  # MI250X / MI250
    "0x740f": "gfx90a",  # MI210
    "0x74a1": "gfx942",  # MI300X
    "0x73bf": "gfx1030",  # Navi 21: RX 6800 / 6900
    "0x73df": "gfx1031",  # Navi 22: RX 6700 XT
    "0x744c": "gfx1100",  # Navi 31: RX 7900 XTX
    "0x747e": "gfx1101",  # Navi 32: RX 7800 XT
    "0x1900": "gfx1103",  # Phoenix 3 iGPU (Radeon 780M)
}

# Targets without their own official wheels that people run through an override
# of a sibling with the same ISA family (unsupported by AMD; results may differ).
OVERRIDE_SIBLING: Mapping[str, str] = {
    "gfx1031": "10.3.0",
    "gfx1032": "10.3.0",
    "gfx1034": "10.3.0",
    "gfx1035": "10.3.0",
    "gfx1036": "10.3.0",
    "gfx1101": "11.0.0",
    "gfx1102": "11.0.0",
    "gfx1103": "11.0.0",
}

# LLVM generic processors (AMDGPUUsage, "Generic Processors") and the targets they cover.
GENERIC: Mapping[str, frozenset[str]] = {
    "gfx9-generic": frozenset({"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}),
    "gfx9-4-generic": frozenset({"gfx940", "gfx941", "gfx942", "gfx950"}),
    "gfx10-1-generic": frozenset({"gfx1010", "gfx1011", "gfx1012", "gfx1013"}),
    "gfx10-3-generic": frozenset({f"gfx103{i}" for i in range(7)}),
    "gfx11-generic": frozenset({"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152"}),
    "gfx12-generic": frozenset({"gfx1200", "gfx1201"}),
}

_GFX = re.compile(r"^(gfx[0-9a-z-]+?)((?::[a-z]+[+-])*)$")


@dataclass(frozen=True)
class GfxTarget:
    base: str  # "gfx90a"
    features: tuple[tuple[str, bool], ...] = ()  # (("sramecc", True), ("xnack", False)); absent = any

    @classmethod
    def parse(cls, text: str) -> GfxTarget:
        text = text.strip()
        m = _GFX.match(text)
        if not m:
            raise ValueError(f"not a gfx target: {text!r}")
        feats = tuple((f[:-1], f[-1] == "+") for f in m.group(2).split(":") if f)
        return cls(m.group(1), feats)

    def feature(self, name: str) -> bool | None:
        return dict(self.features).get(name)

    def __str__(self) -> str:
        return self.base + "".join(f":{k}{'+' if v else '-'}" for k, v in self.features)


def override_target(value: str | None) -> str | None:
    """``HSA_OVERRIDE_GFX_VERSION`` ("10.3.0", "9.0.10") -> the gfx processor it selects ("gfx1030", "gfx90a")."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", value or "")
    if not m:
        return None
    major, minor, step = (int(x) for x in m.groups())
    if minor > 15 or step > 15:
        return None
    return f"gfx{major}{minor:x}{step:x}"


def code_object_runs_on(code: GfxTarget, device: GfxTarget) -> bool:
    if code.base != device.base and device.base not in GENERIC.get(code.base, ()):
        return False
    for name, pinned in code.features:
        have = device.feature(name)
        if have is not None and have != pinned:
            return False
    return True


@dataclass(frozen=True)
class ArchResult:
    compatible: bool | None  # None: cannot tell (no arch list, unreadable device arch)
    device_arch: str  # as reported: "gfx90a:sramecc+:xnack-" or "8.6"
    effective_arch: str  # what code is loaded for: the override target, or "sm_86"
    arch_list: tuple[str, ...]
    matched: tuple[str, ...] = ()
    message: str = ""
    remediation: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)  # caveats that are not failures (override, PTX JIT)

    def to_dict(self) -> dict[str, object]:
        return {
            "compatible": self.compatible,
            "device_arch": self.device_arch,
            "effective_arch": self.effective_arch,
            "arch_list": list(self.arch_list),
            "matched": list(self.matched),
            "message": self.message,
            "remediation": self.remediation,
            "notes": list(self.notes),
        }


def _wheel_hint(base: str, rocm_family: str | None) -> str:
    index = f"https://download.pytorch.org/whl/rocm{rocm_family}" if rocm_family else "a ROCm wheel index"
    return (
        f"install a torch build whose torch.cuda.get_arch_list() includes {base} (e.g. from {index}, "
        f"matching the installed ROCm; check the list before rolling out), or build from source with "
        f"PYTORCH_ROCM_ARCH={base}"
    )


def check_rocm(
    device_arch: str,
    arch_list: Iterable[str],
    *,
    override: str | None = None,
    chip_id: str | None = None,
    rocm_family: str | None = None,
) -> ArchResult:
    """``device_arch`` as reported (gcnArchName / rocminfo ISA), ``override`` = $HSA_OVERRIDE_GFX_VERSION."""
    archs = tuple(a.strip() for a in arch_list if a.strip())
    try:
        device = GfxTarget.parse(device_arch)
    except ValueError:
        return ArchResult(None, device_arch, device_arch, archs, message=f"unreadable device arch {device_arch!r}")
    notes: list[str] = []
    effective = device
    forced = override_target(override)
    if override and not forced:
        notes.append(
            f"HSA_OVERRIDE_GFX_VERSION={override!r} is not MAJOR.MINOR.STEP; the runtime ignores or rejects it"
        )
    elif forced:
        effective = GfxTarget(forced, device.features)
        notes.append(
            f"HSA_OVERRIDE_GFX_VERSION={override} is in effect: the runtime loads {forced} code objects on this "
            f"device; kernels built for another ISA can give wrong results or hang (unsupported by AMD); "
            f"remove it once a build carries the native target"
        )
    native = KNOWN_CHIPS.get((chip_id or "").lower())
    if native and native != effective.base:
        notes.append(
            f"chip {chip_id} is natively {native} but reports {effective.base}: an override "
            f"(HSA_OVERRIDE_GFX_VERSION) was in effect where this was read"
        )
    if not archs:
        return ArchResult(
            None,
            device_arch,
            str(effective),
            archs,
            message="torch reports no arch list (CPU-only build, or no GPU visible to torch): cannot predict",
            notes=tuple(notes),
        )
    parsed = []
    for a in archs:
        try:
            parsed.append((a, GfxTarget.parse(a)))
        except ValueError:
            notes.append(f"arch list entry {a!r} is not a gfx target; ignored")
    matched = tuple(a for a, t in parsed if code_object_runs_on(t, effective))
    if matched:
        return ArchResult(
            True,
            device_arch,
            str(effective),
            archs,
            matched,
            f"{effective} can load code objects for {', '.join(matched)}",
            notes=tuple(notes),
        )
    same_base = [t for _, t in parsed if t.base == effective.base]
    if same_base:
        pinned = sorted({f"{k}{'+' if v else '-'}" for t in same_base for k, v in t.features})
        fixes = []
        for t in same_base:
            for name, want in t.features:
                if effective.feature(name) not in (None, want) and name == "xnack":
                    fixes.append(f"run with HSA_XNACK={1 if want else 0} (needs a kernel with XNACK support)")
        fixes.append(
            f"or use a build that carries plain {effective.base} (any xnack/sramecc) "
            f"or {effective}; source builds: PYTORCH_ROCM_ARCH={effective.base}"
        )
        return ArchResult(
            False,
            device_arch,
            str(effective),
            archs,
            message=f"this build carries {effective.base} only as {', '.join(map(str, same_base))} "
            f"({', '.join(pinned)} pinned) but the device runs {effective}: kernels fail with "
            f"hipErrorNoBinaryForGpu",
            remediation="; ".join(dict.fromkeys(fixes)),
            notes=tuple(notes),
        )
    remediation = _wheel_hint(native or effective.base, rocm_family)
    sibling = OVERRIDE_SIBLING.get(native or effective.base)
    if sibling and override_target(sibling) in {t.base for _, t in parsed} and not forced:
        remediation += (
            f"; or, at your own risk, HSA_OVERRIDE_GFX_VERSION={sibling} (runs {override_target(sibling)} "
            f"code on {native or effective.base}; unsupported by AMD)"
        )
    return ArchResult(
        False,
        device_arch,
        str(effective),
        archs,
        message=f"torch carries no code object for {effective} (it has {', '.join(archs)}): the first kernel "
        f"fails with hipErrorNoBinaryForGpu",
        remediation=remediation,
        notes=tuple(notes),
    )


_SM = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


def _cc(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    if not m:
        raise ValueError(f"not a compute capability: {text!r}")
    return int(m.group(1)), int(m.group(2))


def check_cuda(compute_capability: str, arch_list: Iterable[str]) -> ArchResult:
    """``compute_capability`` "8.6" against ["sm_80", "sm_86", "compute_90", ...]."""
    archs = tuple(a.strip() for a in arch_list if a.strip())
    try:
        major, minor = _cc(compute_capability)
    except ValueError as err:
        return ArchResult(None, compute_capability, compute_capability, archs, message=str(err))
    sm = f"sm_{major}{minor}"
    if not archs:
        return ArchResult(None, compute_capability, sm, archs, message="torch reports no arch list: cannot predict")
    sass: list[str] = []
    ptx: list[str] = []
    notes: list[str] = []
    for a in archs:
        m = _SM.match(a)
        if not m:
            notes.append(f"arch list entry {a!r} not understood; ignored")
            continue
        kind, amaj, amin, suffix = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if suffix == "a":
            ok = (amaj, amin) == (major, minor)  # arch-specific features: that exact CC only
        elif kind == "sm":
            ok = amaj == major and minor >= amin
        else:
            ok = (major, minor) >= (amaj, amin)
        if ok:
            (sass if kind == "sm" else ptx).append(a)
    if sass:
        return ArchResult(True, compute_capability, sm, archs, tuple(sass), f"{sm} runs SASS for {', '.join(sass)}")
    if ptx:
        notes.append(
            f"only PTX ({', '.join(ptx)}) matches: the driver JIT-compiles every kernel on first use (minutes; "
            f"keep CUDA_CACHE_PATH on a persistent disk) and needs a driver new enough for that PTX"
        )
        return ArchResult(
            True, compute_capability, sm, archs, tuple(ptx), f"{sm} runs by JIT from PTX", notes=tuple(notes)
        )
    return ArchResult(
        False,
        compute_capability,
        sm,
        archs,
        message=f"torch has no SASS for {sm} and no PTX at or below it (it has {', '.join(archs)}): kernels fail "
        f"with 'no kernel image is available for execution on the device'",
        remediation=f"install a torch wheel whose torch.cuda.get_arch_list() includes {sm} (older GPUs need an "
        f"older CUDA wheel index, newer GPUs a newer one), or build from source with "
        f"TORCH_CUDA_ARCH_LIST={major}.{minor}",
        notes=tuple(notes),
    )
