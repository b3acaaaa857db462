"""Every file in tests/fixtures/env/ (copied unedited from shared/fixtures/env or from
the public pages index.jsonl names, plus two synthetic nvidia-smi samples marked so)
is parsed and every fact its index line names is asserted: full outputs and the
partial ones people paste (grep-filtered rocminfo, rocm-smi CSV/JSON, amd-smi text,
table and JSON, collect_env fragments, lspci lines, KFD topology properties)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.machine.probes import (
    amd_smi,
    collect_env,
    kfd_topology,
    lspci,
    nvidia_smi,
    pcie,
    rocm_smi,
    rocminfo,
    versions,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "env"
INDEX = [json.loads(line) for line in (FIXTURES / "index.jsonl").read_text().splitlines() if line.strip()]

# Facts the index records from the issue/PR around the paste, not from the pasted text itself:
# the test checks they really are absent, so a readable fact can never hide here.
CONTEXT_ONLY = {"rocm_smi_lib"}
# Facts in the text that are not about the GPU stack (a uname line, a traceback's source line).
NOT_PARSED = {
    "kernel": "uname output pasted with the version",
    "os": "/etc/issue.net pasted with it",
    "where": "collect_env's own source line in the traceback",
}


def _uniq(items: Any) -> list[Any]:
    return list(dict.fromkeys(items))


def _rocminfo(text: str, key: str, want: Any) -> None:
    r = rocminfo.parse(text)

    def gpu() -> rocminfo.GpuAgent:
        return r.gpus[0]

    got = {
        "gpu_count": lambda: len(r.gpus),
        "gfx": lambda: list(r.gfx_bases),
        "gfx_archs": lambda: [g.gfx_arch for g in r.gpus],
        "fragment": lambda: r.fragment,
        "marketing_names": lambda: _uniq(g.marketing_name for g in r.gpus),
        "cpu_agents": lambda: r.cpu_agents,
        "rock_line": lambda: r.rock_line,
        "runtime_version": lambda: r.runtime_version,
        "runtime_ext_version": lambda: r.runtime_ext_version,
        "chip_id": lambda: gpu().chip_id,
        "compute_units": lambda: gpu().compute_units,
        "isa": lambda: list(gpu().isa) if isinstance(want, list) else (gpu().isa or [None])[0],
        "wsl": lambda: r.wsl,
    }[key]()
    assert got == want


def _rocm_smi(text: str, key: str, want: Any) -> None:
    r = rocm_smi.parse(text)
    d = r.devices[0] if r.devices else rocm_smi.SmiDevice(-1)
    if key == "layout":
        assert want.split()[0] in r.layouts
        assert all(x.name for x in r.devices), "the concise layout's second row carries the name"
        return
    if key == "json_keys_lowercase_c":
        assert "json" in r.layouts
        assert {s for s, _ in d.temperatures_c} >= {"edge", "junction"}
        return
    if key == "has_product_info_section":
        assert (d.card_series is not None) is want
        return
    if key == "rocm":
        assert versions.parse(text).version == want
        return
    got = {
        "gpu_count": lambda: len(r.devices),
        "device_ids": lambda: _uniq(x.device_id for x in r.devices),
        "device_id": lambda: d.device_id,
        "names": lambda: _uniq(x.name for x in r.devices),
        "device_name": lambda: d.name,
        "power_cap": lambda: f"{d.power_cap_w}W",
        "power": lambda: f"{d.power_w}W",
        "partition": lambda: d.partition,
        "driver_version": lambda: r.driver_version,
        "card_series": lambda: d.card_series,
        "card_model": lambda: d.card_model,
        "card_sku": lambda: d.card_sku,
        "sku": lambda: d.card_sku,
        "vbios": lambda: d.vbios,
        "temp_edge": lambda: f"{d.temperature_c}°C",
        "temp": lambda: f"{d.temperature_c}c",
        "gpu_util": lambda: f"{d.gpu_percent:g}%",
        "vram": lambda: f"{d.vram_percent:g}%",
        "gfx_version": lambda: d.gfx_version,
        "vram_total_bytes": lambda: d.vram_total_bytes,
        "gfx": lambda: d.gfx,
        "gpu_index": lambda: d.index,
        "pcie_current": lambda: _link_state(pcie.parse_rocm_smi(text).links[0].current),
    }[key]()
    assert got == (_parse_state(want) if key == "pcie_current" else want)


def _rocm_version(text: str, key: str, want: Any) -> None:
    assert key == "rocm_version"
    assert versions.parse(text).version == want


def _collect_env(text: str, key: str, want: Any) -> None:
    r = collect_env.parse(text)
    if key == "error":
        assert r.error == want
        return
    got = {
        "torch": lambda: r.torch_version,
        "rocm_build": lambda: r.rocm_build,
        "hip_runtime": lambda: r.hip_runtime,
        "miopen": lambda: r.miopen,
        "gpu": lambda: r.gpus[0] if r.gpus else None,
        "gfx": lambda: r.gfx_archs[0].split(":")[0] if r.gfx_archs else None,
        "cuda_available": lambda: r.cuda_available,
        "crashed": lambda: r.crashed,
    }[key]()
    assert got == want


def _amd_smi(text: str, key: str, want: Any) -> None:
    r = amd_smi.parse(text)
    got = {
        "layout": lambda: want if want in r.layouts else r.layouts,
        "gpu_count": lambda: len(r.devices),
        "gfx": lambda: list(r.gfx_targets),
        "market_names": lambda: _uniq(d.market_name for d in r.devices if d.market_name),
        "device_ids": lambda: _uniq(d.device_id for d in r.devices if d.device_id),
        "bdfs": lambda: [d.bdf for d in r.devices],
        "compute_units": lambda: r.devices[0].compute_units,
        "driver_version": lambda: r.driver_version,
        "rocm_version": lambda: r.rocm_version,
    }[key]()
    assert got == want


def _kfd_topology(text: str, key: str, want: Any) -> None:
    r = kfd_topology.parse(text)
    got = {
        "gpu_count": lambda: len(r.gpus),
        "gfx": lambda: list(r.gfx_targets),
        "gfx_target_versions": lambda: [g.gfx_target_version for g in r.gpus],
        "nodes": lambda: [g.node for g in r.gpus],
        "product_names": lambda: [g.get("product_name") for g in r.gpus],
    }[key]()
    assert got == want


def _lspci(text: str, key: str, want: Any) -> None:
    r = lspci.parse(text)
    got = {
        "gpu_count": lambda: len(r.gpus),
        "pci_ids": lambda: [g.pci_id for g in r.gpus],
        "vendors": lambda: [g.vendor for g in r.gpus],
        "names": lambda: [g.name for g in r.gpus],
        "kernel_drivers": lambda: [g.kernel_driver for g in r.gpus],
    }[key]()
    assert got == want


def _nvidia_smi(text: str, key: str, want: Any) -> None:
    r = nvidia_smi.parse(text)
    got = {
        "gpu_count": lambda: len(r.gpus),
        "names": lambda: _uniq(g.name for g in r.gpus),
        "compute_caps": lambda: _uniq(g.compute_cap for g in r.gpus),
        "driver_version": lambda: r.gpus[0].driver_version,
        "memory_total_mib": lambda: r.gpus[0].memory_total_mib,
        "power_missing_on": lambda: next((i for i, g in enumerate(r.gpus) if g.power_w is None), None),
        "warnings_min": lambda: want if len(r.warnings) >= want else len(r.warnings),
    }[key]()
    assert got == want


def _link_state(state: pcie.LinkState) -> tuple[float | None, int | None]:
    return (state.speed_gts, state.width)


def _parse_state(text: str) -> tuple[float, int]:
    m = re.fullmatch(r"(\d+(?:\.\d+)?) GT/s x(\d+)", text)
    assert m, text
    return (float(m.group(1)), int(m.group(2)))


def _pcie_link(links: pcie.PcieLinks, key: str, want: Any) -> None:
    if key == "devices":
        assert len(links.links) == want
        return
    if isinstance(want, dict):  # facts of one device of several, keyed by its address
        link = next(x for x in links.links if x.device == key)
        for k, v in want.items():
            _pcie_fact(link, k, v)
        return
    assert len(links.links) == 1
    _pcie_fact(links.links[0], key, want)


def _pcie_fact(link: pcie.PcieLink, key: str, want: Any) -> None:
    got = {
        "current": lambda: _link_state(link.current),
        "max": lambda: _link_state(link.maximum),
        "max_speed_gts": lambda: link.maximum.speed_gts,
        "max_width": lambda: link.maximum.width,
        "below_max": lambda: link.below_max,
        "speed_downgraded": lambda: "speed" in link.downgraded,
        "width_downgraded": lambda: "width" in link.downgraded,
    }[key]()
    assert got == (_parse_state(want) if key in ("current", "max") else want), key


CHECKERS = {
    "sysfs-pcie": lambda text, key, want: _pcie_link(pcie.parse_sysfs(text), key, want),
    "lspci-vv": lambda text, key, want: _pcie_link(pcie.parse_lspci(text), key, want),
    "pp-dpm-pcie": lambda text, key, want: _pcie_link(pcie.parse_pp_dpm(text), key, want),
    "rocminfo": _rocminfo,
    "rocm-smi": _rocm_smi,
    "rocm-version": _rocm_version,
    "collect_env": _collect_env,
    "nvidia-smi": _nvidia_smi,
    "amd-smi": _amd_smi,
    "kfd-topology": _kfd_topology,
    "lspci": _lspci,
}
PARSERS = {
    "sysfs-pcie": pcie.parse_sysfs,
    "lspci-vv": pcie.parse_lspci,
    "pp-dpm-pcie": pcie.parse_pp_dpm,
    "rocminfo": rocminfo.parse,
    "rocm-smi": rocm_smi.parse,
    "rocm-version": versions.parse,
    "collect_env": collect_env.parse,
    "nvidia-smi": nvidia_smi.parse,
    "amd-smi": amd_smi.parse,
    "kfd-topology": kfd_topology.parse,
    "lspci": lspci.parse,
}


def _checker(entry: dict[str, Any]) -> Any:
    return CHECKERS[entry["file"].split("__")[0]]


CASES = [
    pytest.param(entry, key, value, id=f"{entry['file']}:{key}")
    for entry in INDEX
    for key, value in entry["facts"].items()
]


def test_every_fixture_file_is_indexed_and_has_facts() -> None:
    files = {p.name for p in FIXTURES.iterdir() if p.name != "index.jsonl"}
    indexed = {e["file"] for e in INDEX}
    assert files == indexed
    assert all(e["facts"] for e in INDEX)


@pytest.mark.parametrize(("entry", "key", "want"), CASES)
def test_fact(entry: dict[str, Any], key: str, want: Any) -> None:
    text = (FIXTURES / entry["file"]).read_text(encoding="utf-8")
    if key in CONTEXT_ONLY:
        assert str(want) not in text, f"{key} is in the text: parse it instead of listing it as context"
        return
    if key in NOT_PARSED:
        return
    if key == "peak_product":  # the rated-peak table resolves the product from what the probes read
        _peak_product(entry["file"], text, want)
        return
    _checker(entry)(text, key, want)


CAPTURE_NAMES = {"rocminfo": "rocminfo.txt", "lspci": "lspci.txt", "collect_env": "collect_env.txt"}


def _peak_product(fixture: str, text: str, want: str) -> None:
    from gatekeeper.machine import peaks
    from gatekeeper.machine.facts import parse_texts

    devices = peaks.devices_from_capture(parse_texts({CAPTURE_NAMES[fixture.split("__", maxsplit=1)[0]]: text}))
    assert devices
    assert {(r.product.name if r.product else r.reason) for r in map(peaks.resolve, devices)} == {want}


# A line a tool prints between its own (a driver warning): it must cost no fact of the output around it.
NOISE = "WARNING: interleaved noise: 0x744c 1.0c"


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_truncated_or_noisy_input_never_raises_and_loses_no_fact(entry: dict[str, Any]) -> None:
    """Cut every fixture at several points: the parser keeps going and returns its record. A noise line
    before or after the whole output: every fact the index names is still read."""
    text = (FIXTURES / entry["file"]).read_text(encoding="utf-8")
    parse = PARSERS[entry["file"].split("__")[0]]
    record = type(parse(text))
    for cut in (0, 7, len(text) // 3, len(text) // 2, len(text) - 5):
        result = parse(text[:cut] + "\nWARNING: interleaved noise: 0x744c, 1.0c\n")
        assert type(result) is record
        assert all(isinstance(w, str) for w in result.warnings)
    for noisy in (f"{NOISE}\n{text}", f"{text}\n{NOISE}\n"):
        for key, want in entry["facts"].items():
            if key == "peak_product":
                _peak_product(entry["file"], noisy, want)
            elif key not in CONTEXT_ONLY and key not in NOT_PARSED:
                _checker(entry)(noisy, key, want)


def test_rocminfo_truncation_is_reported() -> None:
    text = (FIXTURES / "rocminfo__thamada-mi300x-x4.txt").read_text()
    r = rocminfo.parse(text[: len(text) // 2])
    assert any("truncated" in w for w in r.warnings)
    assert r.gfx_bases == ("gfx942",)


# A key/value line with a long run of blanks inside made the old lazy "(.*?)\s*$" parts backtrack quadratically
# (30 KB: 0.5 s, 80 KB: 6 s, so these 1 MB lines would take minutes); the parsers now match stripped lines greedily.
@pytest.mark.timeout(60)
def test_long_blank_runs_in_key_value_lines_parse_in_linear_time() -> None:
    line = "  Name:" + " x" * 250_000 + " " * 500_000 + "y   \n"
    rocminfo.parse("Agent 1\n" + line)
    amd_smi.parse("GPU: 0\n" + line.upper())
    blank_key = "Is CUDA available" + " " * 500_000 + "x"
    gpu_line = "GPU 0:" + " x" * 250_000 + " " * 500_000 + "y"
    env = collect_env.parse(f"{blank_key}\nGPU models and configuration:\n{gpu_line}\n")
    assert env.gpus == (gpu_line[len("GPU 0:") :].strip(),)
    blanks = " " * 1_000_000
    amd_smi.parse(f"GPU: 0\n  MARKET{blanks}NAME\n| 0000:03:00.0 x{blanks}y\n")
    kfd_topology.parse(f"gfx_target_version 90010\nabc: x{blanks}y\nabc{blanks}:\n")
    lspci.parse(f"03:00.0 VGA{blanks}x\n")
    kv = rocminfo._KEY_VALUE.match("  Marketing Name:   AMD Instinct MI300X   ".rstrip())
    assert kv is not None
    assert kv.group(3) == "AMD Instinct MI300X"


def test_rocminfo_rock_not_loaded() -> None:
    r = rocminfo.parse("ROCk module is NOT loaded, possibly no GPU devices\n")
    assert r.rock_loaded is False
    assert not r.gpus
    assert any("no 'Agent N' blocks" in w for w in r.warnings)


def test_rocminfo_gfx_arch_keeps_feature_suffixes() -> None:
    r = rocminfo.parse((FIXTURES / "rocminfo__thamada-mi300x-x4.txt").read_text())
    assert {g.gfx_arch for g in r.gpus} == {"gfx942:sramecc+:xnack-"}
    assert r.gpus[0].vram_kb == 201310208
    wsl = rocminfo.parse((FIXTURES / "rocminfo__agentic-experiments-wsl-rx7800xt-gfx1101.txt").read_text())
    assert wsl.gpus[0].gfx_arch == "gfx1101"  # not the gfx11-generic second ISA


def test_rocm_smi_json_and_table_merge() -> None:
    table = rocm_smi.parse((FIXTURES / "rocm-smi__thamada-mi300x-x1-concise.txt").read_text())
    js = rocm_smi.parse('{"card0": {"Card series": "AMD Instinct MI300X OAM", "Temperature (Sensor edge) (C)": "40"}}')
    merged = rocm_smi.merge(table, js)
    d = merged.devices[0]
    assert d.temperature_c == 41.0
    assert d.card_series == "AMD Instinct MI300X OAM"
    assert d.name == "AMD Instinct MI300X"


def test_versions() -> None:
    assert versions.parse("6.3.1-48\n").family == "6.3"
    assert versions.parse("").version is None
    assert versions.parse_build("6.2.41133-dd7f95766").family == "6.2"
    assert versions.library_versions(
        ["librocblas.so", "librocblas.so.4", "librocblas.so.4.3.60300", "libhipblaslt.so.0.10.60300", "libfoo.so.1"]
    ) == {"rocblas": "4.3.60300", "hipblaslt": "0.10.60300"}


def test_versions_scan_libraries(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    for name in ("librocblas.so.4.2.60200", "libMIOpen.so.1.0.60200"):
        (tmp_path / "lib" / name).write_bytes(b"")
    assert versions.scan_libraries(tmp_path) == {"rocblas": "4.2.60200", "miopen": "1.0.60200"}
    assert versions.scan_libraries(tmp_path / "missing") == {}


def test_collect_env_cuda_gpu_block() -> None:
    text = (
        "PyTorch version: 2.5.1+cu124\nCUDA used to build PyTorch: 12.4\nROCM used to build PyTorch: N/A\n"
        "GPU models and configuration: \nGPU 0: NVIDIA A100-SXM4-80GB\nGPU 1: NVIDIA A100-SXM4-80GB\n\n"
        "Nvidia driver version: 550.54.15\n"
    )
    r = collect_env.parse(text)
    assert r.gpus == ("NVIDIA A100-SXM4-80GB",) * 2
    assert r.cuda_build == "12.4"
    assert r.rocm_build is None
    assert r.nvidia_driver == "550.54.15"


def test_find_rocm_root(tmp_path: Path) -> None:
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text("6.3.1-48\n")
    assert versions.find_rocm_root({"ROCM_PATH": str(tmp_path)}) == tmp_path
    assert versions.find_rocm_root({"ROCM_PATH": str(tmp_path / "none"), "ROCM_HOME": str(tmp_path)}) == tmp_path


def test_rocm_smi_vram_bytes_from_sections_and_json() -> None:
    text = "GPU[0]\t\t: VRAM Total Memory (B): 206141652992\nGPU[0]\t\t: VRAM Total Used Memory (B): 296837120\n"
    d = rocm_smi.parse(text).devices[0]
    assert d.vram_total_bytes == 206141652992
    assert d.vram_used_bytes == 296837120
    js = rocm_smi.parse('{"card0": {"VRAM Total Memory (B)": "17163091968", "VRAM Total Used Memory (B)": "1"}}')
    assert js.devices[0].vram_total_bytes == 17163091968


def test_rocm_smi_pci_bus_from_sections_json_and_csv() -> None:
    # rocm-smi -a (and --showbus) print a "PCI Bus ID" section; --json a "PCI Bus" key (both real captures)
    showall = rocm_smi.parse((FIXTURES / "rocm-smi__thamada-mi300x-x4-showall.txt").read_text(encoding="utf-8"))
    assert [d.pci_bus for d in showall.devices] == ["0000:26:00.0", "0000:46:00.0", "0000:65:00.0", "0000:85:00.0"]
    js = rocm_smi.parse((FIXTURES / "rocm-smi__systeminformation-960-json-780m.txt").read_text(encoding="utf-8"))
    assert js.devices[0].pci_bus == "0000:C4:00.0"
    # --showbus --csv (constructed in the --csv form of the real captures: a "device,<key>" header)
    assert rocm_smi.parse("device,PCI Bus\ncard0,0000:26:00.0\n").devices[0].pci_bus == "0000:26:00.0"


def test_versions_labelled_lines() -> None:
    # amd-smi version prints the ROCm release among other versions on one line
    line = "AMDSMI Tool: 24.6.2+2b02a07 | AMDSMI Library version: 24.6.2.0 | ROCm version: 6.2.0\n"
    assert versions.parse(line).version == "6.2.0"
    assert versions.parse("6.2.41133-dd7f95766\n").family == "6.2"  # hipconfig --version


# --- partial captures: provenance, the gfx target mappings, fragments ---------------------------------

PARTIAL_FORMATS = {
    "rocminfo grep fragment": lambda e, t: e["file"].startswith("rocminfo__") and rocminfo.parse(t).fragment,
    "rocm-smi CSV": lambda e, t: e["file"].startswith("rocm-smi__") and "csv" in rocm_smi.parse(t).layouts,
    "rocm-smi JSON": lambda e, t: e["file"].startswith("rocm-smi__") and "json" in rocm_smi.parse(t).layouts,
    "amd-smi text": lambda e, t: (
        e["file"].startswith("amd-smi__") and {"text", "table"} & set(amd_smi.parse(t).layouts)
    ),
    "amd-smi JSON": lambda e, t: e["file"].startswith("amd-smi__") and "json" in amd_smi.parse(t).layouts,
    "collect_env fragment": lambda e, t: e["file"].startswith("collect_env__") and "fragment" in e["file"],
    "lspci": lambda e, t: e["file"].startswith("lspci__"),
    "KFD topology": lambda e, t: e["file"].startswith("kfd-topology__"),
}


@pytest.mark.parametrize("kind", PARTIAL_FORMATS)
def test_each_partial_format_has_two_real_captures_with_provenance(kind: str) -> None:
    real = [
        e
        for e in INDEX
        if not e.get("synthetic") and PARTIAL_FORMATS[kind](e, (FIXTURES / e["file"]).read_text(encoding="utf-8"))
    ]
    assert len(real) >= 2, f"{kind}: {[e['file'] for e in real]}"
    for e in real:
        assert e["source"]
        assert e["notes"]
        assert e["facts"]
        if "url" in e:
            assert e["url"].startswith("https://github.com/")
            assert "date" in e  # None where the page shows none (the notes say so)
        else:  # entries copied from shared/fixtures: repository@commit:path, or the issue/PR they were pasted in
            assert e["source"].startswith("github:") or re.search(r"(issue|pull request) #\d+", e["source"])


GFX_TARGET_VERSIONS = {  # KFD's gfx_target_version -> the LLVM target (minor and stepping are hex digits)
    90006: "gfx906",
    90008: "gfx908",
    90010: "gfx90a",
    90012: "gfx90c",
    90402: "gfx942",
    90500: "gfx950",
    100300: "gfx1030",
    100301: "gfx1031",
    110000: "gfx1100",
    110501: "gfx1151",
    120001: "gfx1201",
    0: None,  # a CPU node
}


def _mapping_failures() -> list[str]:
    """Every check of the KFD mapping: the table above and the facts of every KFD fixture."""
    failures = [
        f"{v} -> {kfd_topology.gfx_name(v)}, want {want}"
        for v, want in GFX_TARGET_VERSIONS.items()
        if kfd_topology.gfx_name(v) != want
    ]
    for e in INDEX:
        if e["file"].startswith("kfd-topology__"):
            for key, want in e["facts"].items():
                try:
                    _kfd_topology((FIXTURES / e["file"]).read_text(), key, want)
                except AssertionError:
                    failures.append(f"{e['file']}:{key}")
    return failures


def test_gfx_target_version_mapping() -> None:
    assert _mapping_failures() == []
    topo = kfd_topology.parse(
        "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n"
        "cpu_cores_count 0\nsimd_count 192\ngfx_target_version 110000\n"
    )
    assert [g.gfx for g in topo.gpus] == ["gfx1100"]  # the CPU node (version 0) is no GPU
    assert kfd_topology.gfx_name(91600) is None  # stepping 16 has no hex digit: malformed, not guessed


WRONG_MAPPINGS = {
    "decimal stepping": lambda v: f"gfx{v // 10000}{(v // 100) % 100}{v % 100}" if v else None,
    "minor dropped": lambda v: f"gfx{v // 10000}{v % 100:x}" if v else None,
    "hex of the whole": lambda v: f"gfx{v:x}" if v else None,
}


@pytest.mark.parametrize("wrong", WRONG_MAPPINGS)
def test_a_planted_wrong_kfd_mapping_fails(monkeypatch: pytest.MonkeyPatch, wrong: str) -> None:
    monkeypatch.setattr(kfd_topology, "gfx_name", WRONG_MAPPINGS[wrong])
    assert _mapping_failures(), f"the {wrong} mapping passed every check: the checks cannot fail"


def test_a_planted_wrong_rocm_smi_gfx_version_mapping_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """rocm-smi prints gfx90a as gfx9010 (real capture: rocm_smi_lib#159); taking it as printed is wrong."""
    entry = next(e for e in INDEX if e["file"] == "rocm-smi__rocm-smi-lib-159-showproductname-json-mi250x.json")
    text = (FIXTURES / entry["file"]).read_text()
    _rocm_smi(text, "gfx", entry["facts"]["gfx"])
    assert [rocm_smi.gfx_from_smi(v) for v in ("gfx9010", "gfx9012", "gfx1201", "gfx942", "gfx90a", "gfx91600")] == [
        "gfx90a",
        "gfx90c",
        "gfx1201",
        "gfx942",
        "gfx90a",
        None,
    ]
    monkeypatch.setattr(rocm_smi, "gfx_from_smi", lambda value: value)
    with pytest.raises(AssertionError):
        _rocm_smi(text, "gfx", entry["facts"]["gfx"])


def test_rocminfo_name_grep_keeps_cpus_out_and_isa_with_its_agent() -> None:
    """`rocminfo | grep -i name` shape (lines of the real thamada MI300X output, filtered here)."""
    full = (FIXTURES / "rocminfo__thamada-mi300x-x4.txt").read_text()
    grep = "\n".join(line for line in full.splitlines() if "name" in line.lower())
    r = rocminfo.parse(grep)
    assert r.fragment
    assert len(r.gpus) == 4
    assert {g.gfx_arch for g in r.gpus} == {"gfx942:sramecc+:xnack-"}
    assert {g.marketing_name for g in r.gpus} == {"AMD Instinct MI300X"}
    assert r.cpu_agents == 2
    assert not rocminfo.parse(full).fragment


def test_kfd_topology_shapes() -> None:
    grep_h = (
        "/sys/class/kfd/kfd/topology/nodes/0/properties:gfx_target_version 0\n"
        "/sys/class/kfd/kfd/topology/nodes/1/properties:gfx_target_version 90010\n"
        "/sys/class/kfd/kfd/topology/nodes/2/properties:gfx_target_version 90010\n"
    )
    r = kfd_topology.parse(grep_h)
    assert [(g.node, g.gfx) for g in r.gpus] == [(1, "gfx90a"), (2, "gfx90a")]
    assert kfd_topology.parse("nothing here\n").warnings
    assert kfd_topology.parse("gfx_target_version 91600\n").warnings  # malformed: named, not mapped


def test_lspci_counts_a_device_once_and_only_gpu_vendors() -> None:
    r = lspci.parse((FIXTURES / "lspci__roboticsinfrastructure-463-nvidia-and-rembrandt.txt").read_text())
    assert [d.slot for d in r.devices] == ["0000:01:00.0", "0000:74:00.0"]
    other = lspci.parse("00:02.0 VGA compatible controller: Intel Corporation HD Graphics 630 (rev 04)\n")
    assert len(other.devices) == 1
    assert other.gpus == ()
    assert other.warnings
