"""The openb trace format (Alibaba cluster-trace-gpu-v2023, as used by FGD), parsed from text.

Nodes: `sn, cpu_milli, memory_mib, gpu, model`. Pods: `name, cpu_milli, memory_mib, num_gpu,
gpu_milli[, gpu_spec, ...]`; `gpu_spec` lists allowed models joined by `|`. Extra columns are
ignored. Errors name the line.
"""

from __future__ import annotations

import csv
import io

from cardhour.scheduler.request import Request
from cardhour.scheduler.state import NodeInfo

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


class TraceError(ValueError):
    """A trace file that does not parse; the message names the line."""


def _rows(text: str, required: tuple[str, ...], what: str) -> list[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceError(f"{what} file lacks columns {', '.join(missing)}")
    return [(i + 2, row) for i, row in enumerate(reader)]


def _int(row: dict[str, str], key: str, line: int) -> int:
    try:
        value = int(row[key])
    except (TypeError, ValueError):
        raise TraceError(f"line {line}: {key} must be an integer, got {row[key]!r}") from None
    if value < 0:
        raise TraceError(f"line {line}: {key} must not be negative")
    return value


def parse_nodes(text: str) -> list[NodeInfo]:
    nodes = []
    for line, row in _rows(text, NODE_COLUMNS, "node"):
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
    return nodes


def parse_pods(text: str) -> list[Request]:
    pods = []
    for line, row in _rows(text, POD_COLUMNS, "pod"):
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
