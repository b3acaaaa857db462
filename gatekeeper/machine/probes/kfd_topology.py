"""KFD topology: ``/sys/class/kfd/kfd/topology/nodes/N/properties`` as people paste it.

Accepted shapes, alone or mixed:

- ``cat .../nodes/N/properties``: ``key value`` lines (a new node starts where a key repeats);
- ``grep -H . .../nodes/*/properties`` / ``grep key .../nodes/*/properties``: ``PATH:key value``;
- ``grep key .../nodes/4/properties`` with the command line pasted above its output;
- ``rocprofv3-avail info``: ``GPU:0`` headers and padded ``key : value`` lines.

``gfx_target_version`` is decimal ``major * 10000 + minor * 100 + stepping``; the
target name spells minor and stepping as hex digits: 90010 is gfx90a, 110000 is
gfx1100 (``gfx_name``). Nodes whose version is 0 are CPUs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gatekeeper.machine.probes import integer
from gatekeeper.machine.probes.rocminfo import strip_ansi

__all__ = ["KfdNode", "KfdTopology", "gfx_name", "parse"]

_PATH_NODE = re.compile(r"/nodes/(\d+)/properties")
_PATH_LINE = re.compile(r"^(?P<path>\S*/nodes/(?P<node>\d+)/properties):(?P<rest>.*)$")
# on stripped lines, greedy: a lazy "\S.*?" before "\s*$" backtracked quadratically on long blank runs
_KV = re.compile(r"^(?P<key>[a-z][a-z0-9_]*)(?:\s*:\s*|\s+)(?P<value>\S.*)$")
_HEADER = re.compile(r"^GPU\s*:\s*(\d+)\s*$")
_KNOWN = {"gfx_target_version", "cpu_cores_count", "simd_count", "vendor_id", "device_id", "gpu_id", "node_id"}


def gfx_name(version: int) -> str | None:
    """KFD's integer gfx_target_version as an LLVM target name; None when it is no GPU (0) or malformed."""
    if version <= 0:
        return None
    major, minor, stepping = version // 10000, (version // 100) % 100, version % 100
    if minor > 15 or stepping > 15:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


@dataclass(frozen=True)
class KfdNode:
    node: int | None  # the topology node number, when the paste names it
    properties: tuple[tuple[str, str], ...] = ()

    def get(self, key: str) -> str | None:
        return next((v for k, v in self.properties if k == key), None)

    def _int(self, key: str) -> int | None:
        value = self.get(key)
        return integer(value) if value is not None and re.fullmatch(r"\d+", value) else None

    @property
    def gfx_target_version(self) -> int | None:
        return self._int("gfx_target_version")

    @property
    def gfx(self) -> str | None:
        v = self.gfx_target_version
        return gfx_name(v) if v is not None else None

    @property
    def is_gpu(self) -> bool:
        v = self.gfx_target_version
        if v is not None:
            return v > 0
        simd = self._int("simd_count")
        return bool(simd) and not self._int("cpu_cores_count")

    @property
    def device_id(self) -> str | None:
        d = self._int("device_id")
        return f"0x{d:04x}" if d is not None else None

    @property
    def vendor_id(self) -> str | None:
        d = self._int("vendor_id")
        return f"0x{d:04x}" if d is not None else None


@dataclass(frozen=True)
class KfdTopology:
    nodes: tuple[KfdNode, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gpus(self) -> tuple[KfdNode, ...]:
        return tuple(n for n in self.nodes if n.is_gpu)

    @property
    def gfx_targets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(g.gfx for g in self.gpus if g.gfx))


class _Nodes:
    def __init__(self) -> None:
        self.nodes: list[tuple[int | None, list[tuple[str, str]]]] = []
        self.by_number: dict[int, list[tuple[str, str]]] = {}

    def start(self, node: int | None) -> list[tuple[str, str]]:
        props: list[tuple[str, str]] = []
        self.nodes.append((node, props))
        if node is not None:
            self.by_number[node] = props
        return props

    def numbered(self, node: int) -> list[tuple[str, str]]:
        return self.by_number.get(node) or self.start(node)

    def plain(self, key: str) -> list[tuple[str, str]]:
        """A `cat` of several properties files: a key seen again starts the next node."""
        if not self.nodes or any(k == key for k, _ in self.nodes[-1][1]):
            return self.start(None)
        return self.nodes[-1][1]


def parse(text: str) -> KfdTopology:
    nodes = _Nodes()
    warnings: list[str] = []
    pending: int | None = None  # the node a pasted command line names
    in_block = False  # under a rocprofv3-avail "GPU:N" header
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        if _HEADER.match(line):
            nodes.start(None)
            in_block = True
            continue
        path = _PATH_LINE.match(line)
        if path:
            line = path.group("rest").strip()
        elif line.startswith(("$", "#")) or "/topology/nodes/" in line:
            named = _PATH_NODE.findall(line)
            pending = integer(named[0]) if len(named) == 1 else None
            continue
        kv = _KV.match(line)
        if not kv:
            continue
        key, value = kv.group("key"), kv.group("value")
        node = integer(path.group("node")) if path else None
        if path and node is None:
            continue  # no node a machine has
        if node is not None:
            target = nodes.numbered(node)
        elif in_block:
            target = nodes.nodes[-1][1]
        elif pending is not None:
            target = nodes.numbered(pending)
        else:
            target = nodes.plain(key)
        target.append((key, value))
    built = tuple(KfdNode(n, tuple(props)) for n, props in nodes.nodes if props)
    built = tuple(n for n in built if any(k in _KNOWN for k, _ in n.properties))
    if not built:
        warnings.append("no KFD node properties found (expected 'gfx_target_version N' lines)")
    for n in built:
        v = n.gfx_target_version
        if n.is_gpu and v is None:
            warnings.append(f"node {n.node if n.node is not None else '?'}: no gfx_target_version line")
        elif v and gfx_name(v) is None:
            warnings.append(f"node {n.node if n.node is not None else '?'}: gfx_target_version {v} is malformed")
    return KfdTopology(nodes=built, warnings=tuple(warnings))
