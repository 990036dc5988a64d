"""Which GPUs inside the chosen node a container gets.

- k whole GPUs: from one NVLink/PCIe-switch domain where possible — the domain with the fewest
  free whole GPUs that still holds k (keeps bigger domains whole); otherwise the fewest domains,
  largest first. On a single-domain node this is "the first k free GPUs by index", the FGD
  simulator's rule.
- a GPU share: "best" = the fitting GPU with the least free milli (ties → lowest index),
  "random" = uniform among fitting GPUs.
"""

from __future__ import annotations

import numpy as np

from cardhour.scheduler.request import MILLI
from cardhour.scheduler.state import FleetState


def whole_gpus(state: FleetState, node: int, k: int) -> tuple[int, ...]:
    free = np.flatnonzero((state.gpu_free[node] == MILLI) & state.gpu_real[node])
    if len(free) < k:
        raise ValueError(f"{state.names[node]} has {len(free)} whole free GPUs, need {k}")
    domains = state.domain[node, free]
    ids, sizes = np.unique(domains, return_counts=True)
    if len(ids) == 1:
        return tuple(int(g) for g in free[:k])
    fitting = sizes >= k
    if fitting.any():
        best = ids[fitting][np.argmin(sizes[fitting])]
        return tuple(int(g) for g in free[domains == best][:k])
    chosen: list[int] = []
    for dom in ids[np.argsort(-sizes, kind="stable")]:
        chosen.extend(int(g) for g in free[domains == dom][: k - len(chosen)])
        if len(chosen) == k:
            break
    return tuple(sorted(chosen))


def share_gpu(state: FleetState, node: int, milli: int, how: str, rng: np.random.Generator) -> int:
    free = state.gpu_free[node]
    fitting = np.flatnonzero(free >= milli)
    if len(fitting) == 0:
        raise ValueError(f"{state.names[node]} has no GPU with {milli} milli free")
    if how == "random":
        return int(fitting[rng.integers(len(fitting))])
    return int(fitting[np.argmin(free[fitting])])
