"""Environment hygiene that bites on GPU runners: overrides, allocator settings,
visible-device masks, device-node access and group membership.

``hygiene_findings(environ, fs, amd=...)`` is pure over its inputs; ``FsFacts.probe()``
reads the live machine once, and ``FsFacts.from_dict`` reads a capture.
"""

from __future__ import annotations

import contextlib
import grp
import os
import stat
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gatekeeper.machine.archcompat import override_target
from gatekeeper.machine.findings import Finding

__all__ = ["ALLOC_KEYS", "DeviceNode", "FsFacts", "hygiene_findings"]

# Keys torch's caching allocator accepts (c10/cuda/CUDAAllocatorConfig); torch
# raises "Unrecognized CachingAllocator option" at the first allocation otherwise.
ALLOC_KEYS = {
    "max_split_size_mb": "blocks larger than this are never split (limits fragmentation)",
    "max_non_split_rounding_mb": "rounding for non-split blocks",
    "roundup_power2_divisions": "rounds allocation sizes to power-of-2 divisions",
    "garbage_collection_threshold": "reclaims cached blocks above this fraction of memory",
    "expandable_segments": "grows segments instead of allocating new ones (less fragmentation)",
    "release_lock_on_cudamalloc": "drops the allocator lock around cudaMalloc",
    "release_lock_on_hipmalloc": "drops the allocator lock around hipMalloc",
    "pinned_use_cuda_host_register": "pins host memory with cudaHostRegister",
    "pinned_use_hip_host_register": "pins host memory with hipHostRegister",
    "pinned_num_register_threads": "threads used to register pinned memory",
    "pinned_use_background_threads": "background threads for pinned allocations",
    "backend": "native or cudaMallocAsync allocator",
    "per_process_memory_fraction": "caps this process's share of device memory",
}


@dataclass(frozen=True)
class DeviceNode:
    path: str
    exists: bool = False
    readable: bool = False
    writable: bool = False
    group: str | None = None  # owning group name ("render", "video")


@dataclass(frozen=True)
class FsFacts:
    kfd: DeviceNode
    dri: DeviceNode
    render_nodes: tuple[DeviceNode, ...] = ()
    groups: tuple[str, ...] = ()  # the current user's group names
    is_root: bool = False

    @classmethod
    def probe(cls, dev: str | Path = "/dev") -> FsFacts:
        dev = Path(dev)
        renders = sorted((dev / "dri").glob("renderD*")) if (dev / "dri").is_dir() else []
        names = []
        for gid in {os.getegid(), *os.getgroups()}:
            with contextlib.suppress(KeyError):
                names.append(grp.getgrgid(gid).gr_name)
        return cls(
            kfd=_node(dev / "kfd"),
            dri=_node(dev / "dri"),
            render_nodes=tuple(_node(p) for p in renders),
            groups=tuple(sorted(names)),
            is_root=os.geteuid() == 0,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FsFacts:
        return cls(
            kfd=DeviceNode(**d["kfd"]),
            dri=DeviceNode(**d["dri"]),
            render_nodes=tuple(DeviceNode(**n) for n in d.get("render_nodes", ())),
            groups=tuple(d.get("groups", ())),
            is_root=bool(d.get("is_root", False)),
        )


def _node(path: Path) -> DeviceNode:
    try:
        st = path.stat()
    except OSError:
        return DeviceNode(str(path))
    group = None
    with contextlib.suppress(KeyError):
        group = grp.getgrgid(st.st_gid).gr_name
    is_dev = stat.S_ISCHR(st.st_mode) or stat.S_ISDIR(st.st_mode)
    return DeviceNode(str(path), is_dev, os.access(path, os.R_OK), os.access(path, os.W_OK), group)


def _override(environ: Mapping[str, str]) -> Finding:
    value = environ.get("HSA_OVERRIDE_GFX_VERSION")
    check = "hygiene.HSA_OVERRIDE_GFX_VERSION"
    if value is None:
        return Finding(check, "ok", "not set: the ROCm runtime uses each device's own gfx target")
    target = override_target(value)
    if target is None:
        return Finding(
            check,
            "error",
            f"HSA_OVERRIDE_GFX_VERSION={value!r} is not MAJOR.MINOR.STEP: the runtime rejects it",
            "unset it, or give the target as e.g. 10.3.0 (gfx1030)",
        )
    return Finding(
        check,
        "warning",
        f"HSA_OVERRIDE_GFX_VERSION={value}: the ROCm runtime reports every GPU as {target} and loads {target} "
        f"code objects on it; on a different ISA kernels can give wrong results or hang (unsupported by AMD)",
        "keep it only for a card without its own target in the wheel (e.g. gfx1031 -> 10.3.0); unset it for "
        "cards the build supports natively",
    )


def _alloc(environ: Mapping[str, str], name: str) -> Finding:
    check = f"hygiene.{name}"
    value = environ.get(name)
    if value is None:
        return Finding(check, "ok", "not set: torch's caching allocator uses its defaults")
    unknown, malformed, known = [], [], []
    for item in filter(None, (x.strip() for x in value.split(","))):
        key, sep, setting = item.partition(":")
        if not sep or not setting:
            malformed.append(item)
        elif key.strip() not in ALLOC_KEYS:
            unknown.append(key.strip())
        else:
            known.append(f"{key.strip()}={setting.strip()} ({ALLOC_KEYS[key.strip()]})")
    if malformed:
        return Finding(
            check,
            "error",
            f"{name}={value!r}: {', '.join(malformed)} is not key:value; torch raises at the first allocation",
            "write it as key:value[,key:value], e.g. expandable_segments:True",
        )
    if unknown:  # an error, as docs/doctor.md says: torch raises at the first allocation, the job cannot run
        return Finding(
            check,
            "error",
            f"{name}={value!r}: unknown key(s) {', '.join(unknown)}; torch rejects keys it does not know "
            f'("Unrecognized CachingAllocator option") at the first allocation',
            f"check the key names against the torch version in use (known here: {', '.join(sorted(ALLOC_KEYS))})",
        )
    return Finding(check, "info", f"{name} set: {'; '.join(known)}")


def _visible(environ: Mapping[str, str], name: str, what: str, gpu_expected: bool) -> Finding:
    check = f"hygiene.{name}"
    value = environ.get(name)
    if value is None:
        return Finding(check, "ok", f"not set: {what} sees every GPU")
    if value.strip() in ("", "-1") and not gpu_expected:
        return Finding(
            check,
            "warning",
            f"{name}={value!r} hides every GPU (as a CPU-only job may intend; this verdict is no GPU verdict)",
            f"unset {name} on GPU runners",
        )
    if value.strip() in ("", "-1"):
        return Finding(
            check,
            "error",
            f"{name}={value!r} hides every GPU from {what}: torch will see no device",
            f"unset {name}, or list the device ids to use (e.g. {name}=0)",
        )
    return Finding(check, "info", f"{name}={value}: {what} sees only device(s) {value}, renumbered from 0")


def _device_nodes(fs: FsFacts) -> list[Finding]:
    out = []
    kfd = fs.kfd
    if not kfd.exists:
        out.append(
            Finding(
                "hygiene.dev_kfd",
                "error",
                "/dev/kfd is missing: the amdgpu kernel driver (ROCk) is not loaded, or the container was started "
                "without it; no GPU will be visible",
                "load the driver (amdgpu-dkms; sudo modprobe amdgpu) or start the container with "
                "--device=/dev/kfd --device=/dev/dri",
            )
        )
    elif not (kfd.readable and kfd.writable):
        out.append(
            Finding(
                "hygiene.dev_kfd",
                "error",
                f"/dev/kfd exists but this user cannot open it read-write (group {kfd.group}): HIP finds no device",
                f"add the user to group {kfd.group or 'render'} (sudo usermod -aG {kfd.group or 'render'} $USER, "
                f"then log in again) or run the container with --group-add {kfd.group or 'render'}",
            )
        )
    else:
        out.append(Finding("hygiene.dev_kfd", "ok", "/dev/kfd is present and read-write for this user"))
    usable = [n for n in fs.render_nodes if n.exists and n.readable and n.writable]
    if not fs.dri.exists or not fs.render_nodes:
        out.append(
            Finding(
                "hygiene.dev_dri",
                "error",
                "/dev/dri has no renderD* node: the GPU's render node is not exposed here",
                "start the container with --device=/dev/dri (or the specific /dev/dri/renderD<N>)",
            )
        )
    elif not usable:
        groups = sorted({n.group or "render" for n in fs.render_nodes})
        out.append(
            Finding(
                "hygiene.dev_dri",
                "error",
                f"no /dev/dri/renderD* node is read-write for this user (group {', '.join(groups)})",
                f"add the user to group {', '.join(groups)} or run the container with --group-add {groups[0]}",
            )
        )
    else:
        out.append(Finding("hygiene.dev_dri", "ok", f"{len(usable)} render node(s) read-write under /dev/dri"))
    return out


def _groups(fs: FsFacts) -> Finding:
    check = "hygiene.groups"
    if fs.is_root:
        return Finding(check, "ok", "running as root: video/render membership is not needed")
    needed = sorted({n.group for n in (fs.kfd, *fs.render_nodes) if n.exists and n.group} or {"render", "video"})
    missing = [g for g in needed if g not in fs.groups]
    if not missing:
        return Finding(check, "ok", f"member of {', '.join(needed)} (owners of /dev/kfd and /dev/dri/renderD*)")
    return Finding(
        check,
        "warning",
        f"not a member of {', '.join(missing)} (owner of the GPU device nodes; ROCm needs render, older "
        f"releases video): access works only through other permissions and breaks on a standard host",
        f"sudo usermod -aG {','.join(missing)} $USER and log in again (containers: --group-add {missing[0]})",
    )


def hygiene_findings(
    environ: Mapping[str, str], fs: FsFacts | None, *, amd: bool, gpu_expected: bool = True
) -> list[Finding]:
    """One finding per hygiene item; device-node items are skipped (with the reason) off AMD machines.

    ``gpu_expected``: a GPU build of torch or a GPU machine, where hiding every device is a mistake.
    """
    out = [
        _override(environ),
        _alloc(environ, "PYTORCH_HIP_ALLOC_CONF"),
        _alloc(environ, "PYTORCH_CUDA_ALLOC_CONF"),
        _visible(environ, "HIP_VISIBLE_DEVICES", "HIP (and torch on ROCm)", gpu_expected),
        _visible(environ, "ROCR_VISIBLE_DEVICES", "the ROCm runtime (below HIP)", gpu_expected),
        _visible(environ, "CUDA_VISIBLE_DEVICES", "CUDA, and HIP on ROCm,", gpu_expected),
    ]
    if "HIP_VISIBLE_DEVICES" in environ and "ROCR_VISIBLE_DEVICES" in environ:
        out.append(
            Finding(
                "hygiene.visible_devices_combined",
                "warning",
                "both ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES are set: HIP's ids index into ROCR's "
                "subset, not physical GPUs, so the device actually used is easy to get wrong",
                "set only one of them (ROCR_VISIBLE_DEVICES for isolation between jobs)",
            )
        )
    if "PYTORCH_HIP_ALLOC_CONF" in environ and "PYTORCH_CUDA_ALLOC_CONF" in environ:
        out.append(
            Finding(
                "hygiene.alloc_conf_combined",
                "warning",
                "both PYTORCH_HIP_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF are set: on ROCm torch reads the HIP one "
                "and ignores the other",
                "keep one (PYTORCH_HIP_ALLOC_CONF on ROCm)",
            )
        )
    if not amd:
        reason = "not an AMD ROCm machine (no ROCm install, no HIP torch): device nodes not needed"
        out += [Finding(c, "skipped", reason) for c in ("hygiene.dev_kfd", "hygiene.dev_dri", "hygiene.groups")]
        return out
    if fs is None:
        reason = "device-node facts not available (capture without fs.json)"
        out += [Finding(c, "skipped", reason) for c in ("hygiene.dev_kfd", "hygiene.dev_dri", "hygiene.groups")]
        return out
    nodes = _device_nodes(fs)
    if not gpu_expected:  # a CPU job in a ROCm image: worth knowing, not worth blocking
        nodes = [
            Finding(f.check, "warning", f"{f.message} (not blocking: no GPU is expected for this job)", f.remediation)
            if f.severity == "error"
            else f
            for f in nodes
        ]
    out += nodes
    out.append(_groups(fs))
    return out
