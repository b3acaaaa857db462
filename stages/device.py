"""Which device a stage runs on, and the environment fingerprint every artifact carries.

On ROCm, torch calls the GPU ``cuda``; ``torch.version.hip`` tells the two apart.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gatekeeper.contract.stage_report import Environment
from gatekeeper.core import budgets, escape, proc
from gatekeeper.core.errors import InputError
from gatekeeper.machine import gpu_state
from gatekeeper.machine.probes import rocm_smi, versions

__all__ = [
    "DeviceInfo",
    "detect",
    "environment",
    "read_amdgpu_driver_version",
    "read_gpu_settings",
    "read_rocm_version",
    "resolve_channel",
    "rocm_root",
]

Kind = Literal["cpu", "rocm", "cuda"]


@dataclass(frozen=True)
class DeviceInfo:
    kind: Kind
    torch_device: str  # "cpu" or "cuda:0" (ROCm GPUs are "cuda" in torch)
    name: str | None = None
    count: int = 0
    gfx_arch: str | None = None
    compute_capability: str | None = None
    total_memory_bytes: int | None = None
    why_cpu: str = ""  # when a GPU was wanted or possible but is not used
    names: tuple[str, ...] = ()  # every visible device, in torch's order
    memory_bytes: tuple[int, ...] = ()
    arch_list: tuple[str, ...] = ()  # torch.cuda.get_arch_list(): the targets this torch build carries
    pci_bus_ids: tuple[str, ...] = ()  # every visible device's, when torch gives them all ("0000:26:00.0")

    @property
    def is_gpu(self) -> bool:
        return self.kind != "cpu"

    def no_gpu_reason(self) -> str:
        return self.why_cpu or "running on CPU"


def detect(requested: str = "auto") -> DeviceInfo:
    import torch

    if requested not in ("auto", "cpu", "cuda", "rocm"):
        raise InputError(None, "--device", f"unknown device {requested!r}", "use auto, cpu or cuda")
    kind: Kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    available = torch.cuda.is_available()
    if requested == "cpu":
        return DeviceInfo("cpu", "cpu", why_cpu="--device cpu was requested")
    if not available:
        build = "HIP" if kind == "rocm" else ("CUDA" if torch.version.cuda else "CPU-only")
        why = f"torch sees no GPU (torch {torch.__version__}, {build} build)"
        if requested in ("cuda", "rocm"):
            raise InputError(
                None, "--device", f"--device {requested} was requested but {why}", "use --device auto or cpu"
            )
        return DeviceInfo("cpu", "cpu", why_cpu=why)
    count = torch.cuda.device_count()
    all_props = [torch.cuda.get_device_properties(i) for i in range(count)]
    props = all_props[0]
    gfx = getattr(props, "gcnArchName", None) if kind == "rocm" else None
    cc = None if kind == "rocm" else f"{props.major}.{props.minor}"
    return DeviceInfo(
        kind=kind,
        torch_device="cuda:0",
        name=props.name,
        count=count,
        gfx_arch=gfx,
        compute_capability=cc,
        total_memory_bytes=int(props.total_memory),
        names=tuple(p.name for p in all_props),
        memory_bytes=tuple(int(p.total_memory) for p in all_props),
        arch_list=tuple(torch.cuda.get_arch_list()),
        pci_bus_ids=gpu_state.bus_ids(all_props) or (),
    )


def rocm_root(environ: Mapping[str, str] | None = None) -> Path | None:
    """The ROCm install: $ROCM_PATH, $ROCM_HOME or /opt/rocm, the first with a .info/version file."""
    return versions.find_rocm_root(os.environ if environ is None else environ)


_VERSION_BYTES = 64 * 1024  # one line ("6.2.4-120"); gatekeeper/machine/snapshot.py reads it with the same bound


def read_rocm_version(environ: Mapping[str, str] | None = None) -> str | None:
    root = rocm_root(environ)
    if root is None:
        return None
    try:  # $ROCM_PATH is the job's to set: a FIFO or a link to /dev/zero there is refused, a large file bounded
        data = budgets.read_capped(root / ".info" / "version", max_bytes=_VERSION_BYTES, what="ROCm version file")
    except InputError:
        return None
    return versions.parse(data.decode("utf-8", errors="replace")).version


def read_amdgpu_driver_version(sys_root: str | Path = "/sys") -> str | None:
    """The amdgpu kernel module's version (DKMS installs expose it; the in-tree driver does not)."""
    try:
        return (Path(sys_root) / "module" / "amdgpu" / "version").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def resolve_channel(explicit: str | None = None, torch_version: str | None = None) -> Literal["stable", "nightly"]:
    """--channel, else $GATEKEEPER_CHANNEL, else nightly when torch is a .dev build."""
    value = explicit or os.environ.get("GATEKEEPER_CHANNEL")
    if value:
        if value not in ("stable", "nightly"):
            raise InputError(None, "--channel", f"unknown channel {value!r}", "use stable or nightly")
        return value  # type: ignore[return-value]
    return "nightly" if torch_version and ".dev" in torch_version else "stable"


def environment(info: DeviceInfo, channel: str | None = None) -> Environment:
    import torch

    driver = read_amdgpu_driver_version() if info.kind == "rocm" else None
    if info.kind == "cuda":
        try:
            driver = str(torch.cuda.driver_version()) if hasattr(torch.cuda, "driver_version") else None
        except Exception:
            driver = None
    extra: dict[str, str | float | bool | None] = {
        "torch_device": info.torch_device,
        "num_threads": torch.get_num_threads(),
        "platform": platform.platform(),
    }
    if info.why_cpu:
        extra["why_cpu"] = info.why_cpu
    miopen = _miopen_version() if info.kind == "rocm" else None
    if miopen:
        extra["miopen_version"] = miopen
    collectives = _nccl_version() if info.kind in ("rocm", "cuda") else None
    if collectives:  # RCCL sits behind the NCCL API on ROCm (gatekeeper history changes names it)
        extra["rccl_version" if info.kind == "rocm" else "nccl_version"] = collectives
    if info.is_gpu:  # the settings a baseline must share (gatekeeper.contract.gpu_state)
        settings, why = read_gpu_settings(info.kind, bus_ids=info.pci_bus_ids)
        extra.update(settings)
        if why:
            extra["gpu_settings_unknown"] = why
    return Environment(
        torch_version=_shown(torch.__version__),
        torch_git_hash=_shown(getattr(torch.version, "git_version", None)),
        hip_version=_shown(getattr(torch.version, "hip", None)),
        cuda_version=_shown(getattr(torch.version, "cuda", None)),
        rocm_version=_shown(read_rocm_version()),
        device_kind=info.kind,
        device_name=_shown(info.name or platform.processor() or platform.machine()),
        device_count=info.count,
        gfx_arch=_shown(info.gfx_arch),
        compute_capability=_shown(info.compute_capability),
        driver=_shown(driver),
        python=sys.version.split()[0],
        host=_shown(socket.gethostname()) or "",
        channel=resolve_channel(channel, torch.__version__),
        extra={key: _shown(value) if isinstance(value, str) else value for key, value in extra.items()},
    )


def _shown(value: str | None) -> str | None:
    """What the machine told (a sysfs file, a tool's output, an error's text) as the artifact may carry it: a
    control character, tab or newline shown as ``\\xNN``. The artifact schema refuses them (a reader cannot tell
    a forged value from a strange one), so the stage that met one writes it escaped rather than refusing its own
    report and failing the job for a driver string."""
    return None if value is None else escape.terminal(value, newlines=False)


_SMI_TIMEOUT_S = 15.0


def read_gpu_settings(
    kind: str, environ: Mapping[str, str] | None = None, bus_ids: Sequence[str] = ()
) -> tuple[dict[str, str | float], str]:
    """(the GPU settings of the job's devices, "") or ({}, why none could be read): power cap, performance
    level, partitions (rocm-smi); power limit, application clock, persistence, compute, ECC and MIG mode
    (nvidia-smi). Which devices (``gatekeeper.machine.gpu_state``): those of ``bus_ids`` (torch's PCI bus
    ids, ``DeviceInfo.pci_bus_ids``), else of the visible-devices variables, else every GPU listed; the
    settings carry ``gpu_state.DEVICES_KEY`` saying which (a note, not a setting)."""
    environ = os.environ if environ is None else environ
    if kind not in ("rocm", "cuda"):
        return {}, "no GPU"
    tool = "rocm-smi" if kind == "rocm" else "nvidia-smi"
    if shutil.which(tool, path=environ.get("PATH")) is None:
        return {}, f"{tool} not found on PATH"
    argv = [tool] if kind == "rocm" else [tool, f"--query-gpu={','.join(gpu_state.NVIDIA_QUERY)}", "--format=csv"]
    res = proc.run(argv, timeout=_SMI_TIMEOUT_S, env=environ)
    if not res.ok:
        return {}, f"{tool} {res.describe()}"
    indices = gpu_state.visible_indices(kind, environ)
    if kind == "cuda":
        settings, how = gpu_state.nvidia_settings(res.stdout, indices, bus_ids)
    else:
        bus_text = ""
        if bus_ids and len(rocm_smi.parse(res.stdout).devices) > 1:  # the plain table has no bus ids
            bus = proc.run([tool, "--showbus"], timeout=_SMI_TIMEOUT_S, env=environ)
            bus_text = bus.stdout if bus.ok else ""  # unread: the variables' indices, and the note says so
        settings, how = gpu_state.rocm_settings(res.stdout, indices, bus_ids, bus_text)
    if not settings:
        return {}, f"{tool} reported none of the settings"
    return {**settings, gpu_state.DEVICES_KEY: how}, ""


def _nccl_version() -> str | None:
    try:
        import torch

        v = torch.cuda.nccl.version()
        return ".".join(str(x) for x in v) if isinstance(v, tuple) else (str(v) if v else None)
    except Exception:
        return None


def _miopen_version() -> str | None:
    try:
        from torch.backends import cudnn  # MIOpen sits behind the cudnn API on ROCm

        v = cudnn.version()
        return str(v) if v else None
    except Exception:
        return None


def tf32_off() -> None:
    """float32 means float32: TF32 (NVIDIA Ampere and later) and XF32 (MI300) fail float32 tolerances by design.

    When torch's own test helpers have frozen the global flags in this process (``torch.testing._internal``
    calls ``disable_global_flags``, as the OpInfo sweep does), the cuDNN/MIOpen flag cannot be set; it is left
    as frozen rather than crashing the check (stage work runs in fresh processes, where it is never frozen).
    """
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    if not torch.backends.flags_frozen():
        torch.backends.cudnn.allow_tf32 = False
