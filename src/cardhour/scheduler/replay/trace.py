"""The openb trace format (Alibaba cluster-trace-gpu-v2023, as used by FGD), parsed from text.

Nodes: `sn, cpu_milli, memory_mib, gpu, model`. Pods: `name, cpu_milli, memory_mib, num_gpu,
gpu_milli[, gpu_spec, ...]`; `gpu_spec` lists allowed models joined by `|`. Extra columns are
ignored. Errors name the line.
"""

from __future__ import annotations

import csv
import io
from collections import Counter

from cardhour.scheduler.request import Request
from cardhour.scheduler.state import NodeInfo

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


class TraceError(ValueError):
    """A trace file that does not parse; the message names the line."""


MAX_VALUE = 10**12  # far above any real node or pod (a 1,000-core node is 10**6 milli)


def read_rows(text: str, required: tuple[str, ...], what: str) -> list[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    try:
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(f"{what} file lacks columns {', '.join(missing)}")
        return [(i + 2, row) for i, row in enumerate(reader)]
    except csv.Error as exc:
        raise TraceError(f"{what} file is not valid CSV: {exc}") from None


def _int(row: dict[str, str], key: str, line: int) -> int:
    try:
        value = int(row[key])
    except (TypeError, ValueError):
        raise TraceError(f"line {line}: {key} must be an integer, got {row[key]!r}") from None
    if not 0 <= value <= MAX_VALUE:
        raise TraceError(f"line {line}: {key} must be between 0 and {MAX_VALUE:.0e}")
    return value


def parse_nodes(text: str) -> list[NodeInfo]:
    nodes = []
    for line, row in read_rows(text, NODE_COLUMNS, "node"):
        gpus = _int(row, "gpu", line)
        nodes.append(
            NodeInfo(
                name=row["sn"],
                cpu_milli=_int(row, "cpu_milli", line),
                memory_mib=_int(row, "memory_mib", line),
                gpu_count=gpus,
                gpu_model=(row["model"] or "") if gpus else "",
            )
        )
    if not nodes:
        raise TraceError("the node file has no nodes")
    if not any(node.gpu_count for node in nodes):
        raise TraceError("the node file has no GPU nodes")
    twice = [name for name, n in Counter(node.name for node in nodes).items() if n > 1]
    if twice:
        raise TraceError(f"node {twice[0]!r} appears more than once")
    return nodes


def parse_pods(text: str) -> list[Request]:
    pods = []
    for line, row in read_rows(text, POD_COLUMNS, "pod"):
        spec = (row.get("gpu_spec") or "").strip()
        try:
            pods.append(
                Request(
                    id=row["name"],
                    cpu_milli=_int(row, "cpu_milli", line),
                    memory_mib=_int(row, "memory_mib", line),
                    num_gpu=_int(row, "num_gpu", line),
                    gpu_milli=_int(row, "gpu_milli", line),
                    gpu_models=frozenset(m for m in spec.split("|") if m),
                )
            )
        except TraceError:
            raise  # already names the line
        except ValueError as exc:
            raise TraceError(f"line {line}: {exc}") from None
    if not pods:
        raise TraceError("the pod file has no pods")
    return pods
