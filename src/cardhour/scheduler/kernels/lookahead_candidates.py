"""Which nodes one lookahead decision tries (lookahead.py): FGD's best nodes, one per distinct
node state, and the share of GPU capacity allocated (the lookahead's start)."""

from __future__ import annotations

import numba as nb
import numpy as np

from cardhour.scheduler.kernels.fgd import MILLI


@nb.njit(cache=True)
def allocated(gpu_free, gpu_count, schedulable):
    """The share of the schedulable nodes' GPU capacity allocated (0 with no capacity)."""
    capacity = 0
    free = 0
    for n in range(gpu_free.shape[0]):
        if schedulable[n]:
            capacity += gpu_count[n] * MILLI
            for g in range(gpu_free.shape[1]):
                free += gpu_free[n, g]
    return 0.0 if capacity == 0 else 1 - free / capacity


@nb.njit(cache=True)
def distinct_best(column, model, gpu_count, dc, cpu_free, gpu_free, k):
    """The indices of the `k` best nodes of `column` (key >= 0, highest first), one per distinct
    node state: (model, GPU count, data centre, whole vCPUs free, sorted per-GPU free milli)."""
    # Usually the first few dozen nodes hold k distinct states: sort the best 8k, and every
    # node only when those run out.
    few = np.empty(8 * k, dtype=np.int64)
    size = 0
    for n in range(column.shape[0]):
        v = column[n]
        if v < 0 or (size == few.shape[0] and v <= column[few[size - 1]]):
            continue
        if size < few.shape[0]:
            size += 1
        q = size - 1
        while q > 0 and column[few[q - 1]] < v:
            few[q] = few[q - 1]
            q -= 1
        few[q] = n
    chosen, found = _distinct(few[:size], column, model, gpu_count, dc, cpu_free, gpu_free, k)
    if found < k and size == few.shape[0]:
        order = np.argsort(-column)
        chosen, found = _distinct(order, column, model, gpu_count, dc, cpu_free, gpu_free, k)
    return chosen[:found]


@nb.njit(cache=True)
def _distinct(order, column, model, gpu_count, dc, cpu_free, gpu_free, k):
    width = gpu_free.shape[1]
    chosen = np.empty(k, dtype=np.int64)
    keys = np.empty((k, 4 + width), dtype=np.int64)
    row = np.empty(4 + width, dtype=np.int64)
    found = 0
    for n in order:
        if column[n] < 0:
            break
        row[0], row[1], row[2], row[3] = model[n], gpu_count[n], dc[n], cpu_free[n] // 1000
        for g in range(width):  # insertion sort of the GPUs' free milli
            v = gpu_free[n, g]
            j = g
            while j > 0 and row[4 + j - 1] > v:
                row[4 + j] = row[4 + j - 1]
                j -= 1
            row[4 + j] = v
        seen = False
        for c in range(found):
            same = True
            for f in range(4 + width):
                if keys[c, f] != row[f]:
                    same = False
                    break
            if same:
                seen = True
                break
        if not seen:
            keys[found] = row
            chosen[found] = n
            found += 1
            if found == k:
                break
    return chosen, found
