"""What a node reports about its own interconnect: `nvidia-smi topo -m` and `ibstat`. Pure.

`nvidia-smi topo -m` prints a tab-separated matrix: a header of `GPU0…GPUn`, NIC columns (`NIC0…`
with a "NIC Legend" mapping them to `mlx5_*` on recent drivers, the `mlx5_*` names themselves on
older ones), then `CPU Affinity`, `NUMA Affinity` and, on recent drivers, `GPU NUMA ID`; one row
per GPU and per NIC, ` X ` on the diagonal. A cell is `NV#` (# bonded NVLinks) or a PCIe path,
nearest first: `PIX` < `PXB` < `PHB` < `NODE` < `SYS`.

`ibstat` prints one `CA 'mlx5_0'` block per adapter, each with `Port N:` blocks of `State`,
`Physical state`, `Rate` (Gb/s) and `Link layer` (`InfiniBand`, or `Ethernet` for RoCE).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cardhour.core.errors import InvalidInput

PCIE_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")  # nearest first
_NV = re.compile(r"NV(\d+)")
_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class GpuTopology:
    gpus: int
    links: tuple[tuple[str, ...], ...]  # [i][j]: "X", "NV18", "PIX", ... (GPU × GPU)
    nics: tuple[str, ...]  # device names (mlx5_*) in column order
    nic_paths: tuple[tuple[str, ...], ...]  # [gpu][nic]
    numa: tuple[int | None, ...]  # per GPU

    def nvlinks(self, i: int, j: int) -> int:
        """Bonded NVLinks between GPUs i and j (0: a PCIe path only)."""
        found = _NV.fullmatch(self.links[i][j])
        return int(found.group(1)) if found else 0

    def nvlink_domains(self) -> list[list[int]]:
        """GPUs joined by NVLink, directly or through others (one domain per NVSwitch board or
        bridge pair); a GPU without NVLink is a domain of its own."""
        seen: set[int] = set()
        domains = []
        for start in range(self.gpus):
            if start in seen:
                continue
            domain, todo = [], [start]
            seen.add(start)
            while todo:
                i = todo.pop()
                domain.append(i)
                for j in range(self.gpus):
                    if j not in seen and self.nvlinks(i, j):
                        seen.add(j)
                        todo.append(j)
            domains.append(sorted(domain))
        return domains

    @property
    def all_to_all_nvlink(self) -> bool:
        """Every GPU pair on NVLink (an HGX/NVSwitch board)."""
        return all(self.nvlinks(i, j) for i in range(self.gpus) for j in range(self.gpus) if i != j)

    @property
    def min_nvlinks(self) -> int:
        """The fewest NVLinks between any pair of GPUs (0 when some pair has none)."""
        pairs = [self.nvlinks(i, j) for i in range(self.gpus) for j in range(i + 1, self.gpus)]
        return min(pairs) if pairs else 0

    def nearest_nic(self, gpu: int, among: set[str] | None = None) -> str | None:
        """The NIC on the shortest PCIe path from `gpu` (ties: the first), among `among`."""
        best: tuple[int, int] | None = None
        for k, name in enumerate(self.nics):
            if among is not None and name not in among:
                continue
            path = self.nic_paths[gpu][k]
            rank = PCIE_PATHS.index(path) if path in PCIE_PATHS else len(PCIE_PATHS)
            if best is None or rank < best[0]:
                best = (rank, k)
        return self.nics[best[1]] if best is not None else None


def _header(line: str) -> list[str] | None:
    """The matrix header's column names, if `line` is it: a tab, then `GPU0`, `GPU1`, … (a
    copy indented with spaces may have lost the leading tab: `GPU0` first, no ` X ` cell)."""
    cells = [cell.strip() for cell in line.split("\t")]
    if cells[0] == "" and "GPU0" in cells:
        return cells[1:]
    if cells[0] == "GPU0" and "X" not in cells:
        return cells
    return None


def parse_topo(text: str) -> GpuTopology:
    """`nvidia-smi topo -m` output. InvalidInput when there is no GPU matrix in it. Terminal
    escapes (nvidia-smi underlines the header on a TTY) and indentation are ignored."""
    lines = [_ANSI.sub("", line).lstrip(" ") for line in text.splitlines() if line.strip()]
    header_at = next((i for i, line in enumerate(lines) if _header(line) is not None), None)
    if header_at is None:
        raise InvalidInput("no GPU matrix in this nvidia-smi topo -m output")
    header = _header(lines[header_at]) or []
    gpu_cols = [c for c in header if re.fullmatch(r"GPU\d+", c)]
    device_cols = [
        c for c in header if c and c not in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
    ]
    nic_cols = device_cols[len(gpu_cols) :]
    legend = {m.group(1): m.group(2) for line in lines if (m := _LEGEND.match(line))}
    rows: dict[str, list[str]] = {}
    for line in lines[header_at + 1 :]:
        if line.strip().startswith("Legend"):
            break
        first, *rest = line.split("\t")
        rows[first.strip()] = [c.strip() for c in rest]
    n = len(gpu_cols)
    links, nic_paths, numa = [], [], []
    for i, name in enumerate(gpu_cols):
        cells = rows.get(name, [])
        if len(cells) < len(device_cols):
            raise InvalidInput(f"nvidia-smi topo -m: row {name} is missing or short")
        row = tuple("X" if k == i else cells[k] for k in range(n))
        for cell in row:
            if cell != "X" and not _NV.fullmatch(cell) and cell not in PCIE_PATHS:
                raise InvalidInput(f"nvidia-smi topo -m: unknown link {cell!r} in row {name}")
        links.append(row)
        nic_paths.append(tuple(cells[n : len(device_cols)]))
        numa_at = header.index("NUMA Affinity") if "NUMA Affinity" in header else None
        value = cells[numa_at] if numa_at is not None and numa_at < len(cells) else ""
        numa.append(int(value) if value.isdigit() else None)
    for i in range(n):
        for j in range(n):
            if links[i][j] != links[j][i]:
                raise InvalidInput(f"nvidia-smi topo -m: GPU{i}-GPU{j} is not symmetric")
    return GpuTopology(
        gpus=n,
        links=tuple(links),
        nics=tuple(legend.get(c, c) for c in nic_cols),
        nic_paths=tuple(nic_paths),
        numa=tuple(numa),
    )


@dataclass(frozen=True)
class Port:
    adapter: str
    number: int
    state: str  # Active, Down, Initializing, Armed
    physical_state: str  # LinkUp, Polling, Disabled, ...
    rate_gbps: float  # 2.5 for 1x SDR; FDR10's `40 (FDR10)` reads 40
    link_layer: str  # InfiniBand | Ethernet

    @property
    def up(self) -> bool:
        return self.state == "Active" and self.physical_state == "LinkUp"


@dataclass(frozen=True)
class IbStatus:
    ports: tuple[Port, ...] = field(default_factory=tuple)

    @property
    def infiniband(self) -> tuple[Port, ...]:
        return tuple(p for p in self.ports if p.link_layer == "InfiniBand")

    def problems(self, expected_ports: int, expected_rate_gbps: int) -> list[str]:
        """What keeps the node's InfiniBand from its expected shape: too few ports, ports not
        up, ports slower than expected. Empty when healthy."""
        ib = self.infiniband
        found = []
        if len(ib) < expected_ports:
            found.append(f"{len(ib)} InfiniBand ports, expected {expected_ports}")
        for p in ib:
            where = f"{p.adapter} port {p.number}"
            if not p.up:
                found.append(f"{where} is {p.state} ({p.physical_state})")
            elif p.rate_gbps < expected_rate_gbps:
                found.append(f"{where} runs at {p.rate_gbps:g} Gb/s, expected {expected_rate_gbps}")
        return found


def parse_ibstat(text: str) -> IbStatus:
    """`ibstat` output (every adapter, or `ibstat CA PORT`'s `CA: 'x'` form). InvalidInput when
    it names no adapter, or when ibstat panicked (an `ibpanic:` line: it stopped part way, so
    the ports it did print are not the node's; `ibwarn:` lines are only warnings)."""
    ports: list[Port] = []
    adapter: str | None = None
    current: dict[str, str] | None = None
    number = 0

    def close() -> None:
        if adapter is not None and current is not None:
            ports.append(_port(adapter, number, current))

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("ibpanic:"):
            raise InvalidInput(f"ibstat failed: {line}")
        if found := re.fullmatch(r"CA:? '([^']+)'", line):
            close()
            adapter, current = found.group(1), None
        elif found := re.fullmatch(r"Port (\d+):", line):
            close()
            number, current = int(found.group(1)), {}
        elif current is not None and ":" in line:
            key, _, value = line.partition(":")
            current[key.strip()] = value.strip()
    close()
    if adapter is None:
        raise InvalidInput("no adapter (CA '...') in this ibstat output")
    return IbStatus(tuple(ports))


def _port(adapter: str, number: int, fields: dict[str, str]) -> Port:
    found = re.match(r"[0-9]+(?:\.[0-9]+)?", fields.get("Rate", "0"))
    if found is None:
        raise InvalidInput(f"ibstat: {adapter} port {number} has rate {fields['Rate']!r}")
    rate = float(found.group(0))
    return Port(
        adapter,
        number,
        fields.get("State", "?"),
        fields.get("Physical state", "?"),
        rate,
        fields.get("Link layer", "InfiniBand"),
    )
