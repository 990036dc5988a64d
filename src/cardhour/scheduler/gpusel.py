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
    # plain Python on the node's few GPUs: numpy's per-call overhead is the cost here
    domain = state.domain[node].tolist()
    free = [
        g
        for g, (milli, real) in enumerate(
            zip(state.gpu_free[node].tolist(), state.gpu_real[node], strict=True)
        )
        if milli == MILLI and real
    ]
    if len(free) < k:
        raise ValueError(f"{state.names[node]} has {len(free)} whole free GPUs, need {k}")
    by_domain: dict[int, list[int]] = {}
    for g in free:
        by_domain.setdefault(domain[g], []).append(g)
    if len(by_domain) == 1:
        return tuple(free[:k])
    ids = sorted(by_domain)
    fitting = [d for d in ids if len(by_domain[d]) >= k]
    if fitting:  # the smallest domain that holds k (the first such id on a tie)
        return tuple(by_domain[min(fitting, key=lambda d: len(by_domain[d]))][:k])
    chosen: list[int] = []
    for d in sorted(ids, key=lambda d: -len(by_domain[d])):  # largest first, ties by id
        chosen.extend(by_domain[d][: k - len(chosen)])
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
