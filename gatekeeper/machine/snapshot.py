"""Raw facts about a machine's GPU stack: run the tools (each with a timeout,
never waited on forever), or read them back from a capture directory.

A capture directory holds the tools' raw outputs under fixed names, so a
broken runner can be diagnosed elsewhere (``gatekeeper doctor --from DIR``):

    rocminfo.txt  rocm-smi.txt  rocm-smi.json  amd-smi.txt  amd-smi.json  version
    collect_env.txt  nvidia-smi.csv  env.txt (secrets masked)  torch.json  fs.json  tools.json

``kfd-topology.txt`` (``/sys/class/kfd/kfd/topology/nodes/*/properties``, as ``grep -H`` prints
them), and, when a person pastes it (``--capture`` does not write it), ``lspci.txt``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatekeeper.core import budgets, files, proc
from gatekeeper.core.errors import InputError
from gatekeeper.core.redact import redact, redact_env
from gatekeeper.machine import schemas
from gatekeeper.machine.hygiene import FsFacts
from gatekeeper.machine.probes.nvidia_smi import QUERY
from gatekeeper.machine.probes.versions import find_rocm_root

__all__ = ["FILES", "TOOLS", "Snapshot", "ToolRun", "read_capture", "take_snapshot", "write_capture"]

_VERSION_BYTES = 64 * 1024  # $ROCM_PATH/.info/version holds one line ("6.2.4-120")

# tool -> (argv, capture file). Several rocm-smi (amd-smi) views go to one file; after a
# rocm-smi (amd-smi) hang the remaining calls of that tool are skipped, not waited on again.
TOOLS: Mapping[str, tuple[tuple[str, ...], str]] = {
    "rocminfo": (("rocminfo",), "rocminfo.txt"),
    "rocm-smi": (("rocm-smi",), "rocm-smi.txt"),
    "rocm-smi --showproductname": (("rocm-smi", "--showproductname"), "rocm-smi.txt"),
    "rocm-smi --json": (
        (
            "rocm-smi",
            "--showproductname",
            "--showtemp",
            "--showpower",
            "--showmemuse",
            "--showmeminfo",
            "vram",
            "--showuse",
            "--json",
        ),
        "rocm-smi.json",
    ),
    "amd-smi version": (("amd-smi", "version"), "amd-smi.txt"),
    "amd-smi static": (("amd-smi", "static"), "amd-smi.txt"),
    "amd-smi static --json": (("amd-smi", "static", "--json"), "amd-smi.json"),
    "nvidia-smi": (("nvidia-smi", f"--query-gpu={','.join(QUERY)}", "--format=csv"), "nvidia-smi.csv"),
    "collect_env": (("{python}", "-m", "torch.utils.collect_env"), "collect_env.txt"),
}
FILES = (
    "rocminfo.txt",
    "rocm-smi.txt",
    "rocm-smi.json",
    "amd-smi.txt",
    "amd-smi.json",
    "lspci.txt",
    "kfd-topology.txt",
    "version",
    "collect_env.txt",
    "nvidia-smi.csv",
    "env.txt",
    "torch.json",
    "fs.json",
    "tools.json",
)

# Asks torch in a child (importing torch in doctor would take seconds and could
# hang on a broken driver). Prints one JSON line after a marker: torch warns on stderr exactly where doctor is
# needed ("UserWarning: HIP initialization: Unexpected error from hipGetDeviceCount()"), and the tool's output
# holds stderr after stdout, so "the last line" was the warning and the probe's answer was lost.
_TORCH_MARK = "gatekeeper-torch-probe: "
_TORCH_PROBE = r"""
import json
out = {}
try:
    import torch
    out.update(version=torch.__version__, hip=getattr(torch.version, "hip", None),
               cuda=getattr(torch.version, "cuda", None), available=False, arch_list=[], devices=[])
    out["available"] = bool(torch.cuda.is_available())
    if out["available"]:
        out["arch_list"] = list(torch.cuda.get_arch_list())
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            out["devices"].append({"name": p.name, "gfx_arch": getattr(p, "gcnArchName", None),
                                   "compute_capability": f"{p.major}.{p.minor}",
                                   "total_memory": int(p.total_memory)})
        if out["hip"]:
            v = torch.backends.cudnn.version()
            out["miopen"] = str(v) if v else None
except Exception as err:
    out["error"] = f"{type(err).__name__}: {err}"
print("gatekeeper-torch-probe: " + json.dumps(out))
"""


@dataclass(frozen=True)
class ToolRun:
    status: str  # "ok", "missing", "timed out", "failed", "skipped"
    detail: str = ""
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "detail": self.detail, "duration_s": round(self.duration_s, 3)}


@dataclass(frozen=True)
class Snapshot:
    source: str  # "live" or the capture directory
    texts: Mapping[str, str] = field(default_factory=dict)  # capture file name -> text
    tools: Mapping[str, ToolRun] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict)  # secrets masked
    fs: FsFacts | None = None
    torch: Mapping[str, Any] | None = None


def _run_tool(argv: tuple[str, ...], environ: Mapping[str, str], timeout: float) -> tuple[ToolRun, str]:
    exe = sys.executable if argv[0] == "{python}" else shutil.which(argv[0], path=environ.get("PATH"))
    if exe is None:
        return ToolRun("missing", f"{argv[0]} not found on PATH"), ""
    result = proc.run([exe, *argv[1:]], timeout=timeout, env=dict(environ))
    output = result.stdout + (("\n" + result.stderr) if result.stderr.strip() else "")
    if result.timed_out:
        return ToolRun("timed out", f"killed after {timeout:g} s", result.duration_s), output
    if result.start_error:
        return ToolRun("missing", result.describe(), result.duration_s), ""
    if result.returncode != 0:
        tail = redact(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "", environ)
        return ToolRun("failed", f"{result.describe()}{': ' + tail if tail else ''}", result.duration_s), output
    return ToolRun("ok", "", result.duration_s), output


# tools known to hang on a wedged driver: after one call hangs (or the tool is missing), skip the rest
_ONE_HANG_SKIPS_REST = ("rocm-smi", "amd-smi")


KFD_TOPOLOGY = Path("/sys/class/kfd/kfd/topology/nodes")
_KFD_MAX_NODES = 256
_KFD_MAX_BYTES = 64 * 1024  # one node's properties file is about 1 KiB


def _read_kfd(root: Path) -> tuple[ToolRun, str]:
    """Each node's properties, one ``PATH:key value`` line per property (what ``grep -H`` prints)."""
    start = time.monotonic()
    try:
        nodes = sorted((p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    except OSError as err:
        return ToolRun("missing", f"{root} not readable ({err.strerror or err}): no amdgpu KFD driver here"), ""
    lines: list[str] = []
    unreadable = []
    for node in nodes[:_KFD_MAX_NODES]:
        path = node / "properties"
        try:
            with path.open(encoding="utf-8", errors="replace") as f:
                text = f.read(_KFD_MAX_BYTES)
        except OSError:
            unreadable.append(node.name)  # a node masked by the device cgroup reads EPERM
            continue
        lines += [f"{path}:{line}" for line in text.splitlines() if line.strip()]
    detail = f"{len(nodes)} node(s)" + (f"; unreadable: {', '.join(unreadable)}" if unreadable else "")
    return ToolRun("ok", detail, time.monotonic() - start), "".join(line + "\n" for line in lines)


def take_snapshot(
    *,
    timeout: float = 20.0,
    environ: Mapping[str, str] | None = None,
    tools_to_run: Mapping[str, tuple[tuple[str, ...], str]] = TOOLS,
    probe_torch: bool = True,
    kfd_root: Path = KFD_TOPOLOGY,
) -> Snapshot:
    """Run the tools on this machine, each under ``timeout`` seconds (torch gets at least 60 s to import)."""
    env = dict(os.environ if environ is None else environ)
    texts: dict[str, str] = {}
    tools: dict[str, ToolRun] = {}
    for name, (argv, fname) in tools_to_run.items():
        if argv[0] in _ONE_HANG_SKIPS_REST and any(
            k.split()[0] == argv[0] and r.status in ("timed out", "missing") for k, r in tools.items()
        ):
            tools[name] = ToolRun("skipped", f"an earlier {argv[0]} call hung or is missing")
            continue
        run, output = _run_tool(argv, env, timeout)
        tools[name] = run
        if output.strip():
            texts[fname] = texts.get(fname, "") + redact(output, env)  # the real env: it knows the secret values
    tools["kfd-topology"], kfd_text = _read_kfd(kfd_root)
    if kfd_text:
        texts["kfd-topology.txt"] = kfd_text
    root = find_rocm_root(env)
    start = time.monotonic()
    if root is not None:
        version = root / ".info" / "version"
        try:  # a one-line file; $ROCM_PATH is the job's to set, so what it names is read bounded
            texts["version"] = budgets.read_capped(version, max_bytes=_VERSION_BYTES, what="ROCm version file").decode(
                "utf-8", errors="replace"
            )
            tools["version"] = ToolRun("ok", str(version), time.monotonic() - start)
        except InputError as err:
            tools["version"] = ToolRun("failed", err.line(), time.monotonic() - start)
    else:
        tools["version"] = ToolRun("missing", "no .info/version under $ROCM_PATH, $ROCM_HOME or /opt/rocm")
    torch_info = None
    if not probe_torch:
        return Snapshot("live", texts, tools, redact_env(env), FsFacts.probe(), None)
    torch_run, torch_out = _run_tool(("{python}", "-c", _TORCH_PROBE), env, max(timeout, 60.0))
    if torch_run.status == "ok":
        # The same rules as a captured torch.json (strict JSON, its schema): the probe runs in the job's Python,
        # whose start-up (a sitecustomize, a .pth file) can print too, so its line is read as input.
        marked = [line[len(_TORCH_MARK) :] for line in torch_out.splitlines() if line.startswith(_TORCH_MARK)]
        try:
            if not marked:
                raise InputError(
                    None,
                    "",
                    f"no line starts with {_TORCH_MARK.strip()!r}",
                    "run doctor --capture with the job's python, where torch imports",
                )
            torch_info = files.parse_json(marked[-1], "torch probe", what="torch probe output")
            schemas.validate("gatekeeper.capture-torch/v1", torch_info, path="torch probe")
        except InputError as err:
            torch_info = None
            torch_run = ToolRun("failed", f"torch probe printed no valid JSON: {err.problem}", torch_run.duration_s)
    tools["torch"] = torch_run
    return Snapshot("live", texts, tools, redact_env(env), FsFacts.probe(), torch_info)


def write_capture(snapshot: Snapshot, directory: str | Path) -> Path:
    directory = Path(directory)
    with files.staged_outputs(directory) as tmp:
        for name, text in snapshot.texts.items():
            files.atomic_write(tmp / name, redact(text, {}))  # token shapes; values were masked when taken
        files.atomic_write(tmp / "env.txt", "".join(f"{k}={v}\n" for k, v in sorted(snapshot.environ.items())))
        files.write_json(tmp / "tools.json", {k: v.to_dict() for k, v in snapshot.tools.items()})
        if snapshot.fs is not None:
            files.write_json(tmp / "fs.json", snapshot.fs.to_dict())
        if snapshot.torch is not None:
            files.write_json(tmp / "torch.json", dict(snapshot.torch))
    return directory


def _read_env(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value
    return out


def _read_capture_json(path: Path, schema_id: str) -> Any:
    """A capture's JSON file, strict (``files.read_json``) and valid against its schema (``machine/schemas``)."""
    doc = files.read_json(path, what=f"capture {path.name}")
    schemas.validate(schema_id, doc, path=str(path))
    return doc


def read_capture(directory: str | Path) -> Snapshot:
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(directory, "", "capture directory not found", "give a directory written by doctor --capture")
    present = [n for n in FILES if (directory / n).is_file()]
    if not present:
        raise InputError(
            directory,
            "",
            "no capture files here",
            f"expected some of {', '.join(FILES)} (gatekeeper doctor --capture DIR writes them)",
        )
    texts = {
        n: files.read_text(directory / n, what="capture file")
        for n in present
        if n not in ("env.txt", "torch.json", "fs.json", "tools.json")
    }
    tools: dict[str, ToolRun] = {}
    if "tools.json" in present:
        raw = _read_capture_json(directory / "tools.json", "gatekeeper.capture-tools/v1")
        tools = {
            name: ToolRun(value["status"], value.get("detail", ""), float(value.get("duration_s", 0.0)))
            for name, value in raw.items()
        }
    fs = None
    if "fs.json" in present:
        fs = FsFacts.from_dict(_read_capture_json(directory / "fs.json", "gatekeeper.capture-fs/v1"))
    torch_info = (
        _read_capture_json(directory / "torch.json", "gatekeeper.capture-torch/v1") if "torch.json" in present else None
    )
    environ = _read_env(files.read_text(directory / "env.txt")) if "env.txt" in present else {}
    return Snapshot(str(directory), texts, tools, environ, fs, torch_info)
