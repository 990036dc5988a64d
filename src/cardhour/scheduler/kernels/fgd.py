"""Compiled (numba) loops behind `FgdTable`: FGD's score of one node for one request shape, the
best node for a shape, and a lookahead rollout that places future pods by FGD and undoes them.

Arithmetic follows `frag.FragMeter.node_frag` and `fgd.FgdScore` operation for operation
(integer-valued float64 sums, one division by the weight total, floor(100·sigmoid(Δ/1000))), so
the decisions are the engine's; `tests/scheduler/test_fgd_table.py` replays traces both ways.

Arrays are passed in two bundles so signatures stay short:
- `st`: (gpu_free [N,G] i8, cpu_free i8, mem_free i8, version i8, schedulable b, exclusive b,
  model i4, gpu_count i8, dc i4) — the FleetState's own arrays, changed in place by rollouts and
  restored;
- `mt`: (fit [N,M] f8, small [N,M] f8, idle f8, frag f8, seen i8, access [N,M] b,
  wmilli i8, wcpu i8, wcount i8, weight f8, wsum [1] f8) — the meter cache and the workload M;
- `tb`: (key [T,N] f8, gpu [T,N] i8, stamp [T,N] i8 (a row per shape), order f8, shapes [T,6] i8
  (cpu, memory, GPU count, milli per GPU, keep-whole, data centre or -1), allowed [T, models+1] b,
  counter [1] i8).
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

from cardhour.scheduler.kernels import numba_cache as kernel_cache

kernel_cache.install()  # before the first kernel: caches stamped by every kernel module

MILLI = 1000


def plain(inline: bool = False) -> Any:
    """`nb.njit(cache=True)` without the runtime's reference counting (numba's `_nrt=False`), for
    kernels that allocate nothing; `inline`: compiled into each caller. A call that passes the
    array bundles to a reference-counted kernel costs about 1 µs, more than scoring a node."""
    options: dict[str, Any] = {"cache": True, "_nrt": False}
    if inline:
        options["inline"] = "always"
    return nb.njit(**options)


# Versions a rollout gives the nodes it touches: unique, far above what `FleetState` counts to.
ROLLOUT_VERSIONS = 1 << 40


@plain(inline=True)
def _type_frag(access, fitv, cnt, cpu, wcpu, smallv, idle):
    if access and fitv >= cnt and cpu >= wcpu:
        return smallv
    return idle


@plain(inline=True)
def refresh_node(n, st, mt):
    """Recompute the meter's statistics and F_n(M) of node n (frag.FragMeter.refresh)."""
    gpu_free, cpu_free, _, version = st[0], st[1], st[2], st[3]
    fit, small, idle, frag, seen, access, wmilli, wcpu, wcount, weight, wsum = mt
    g_width = gpu_free.shape[1]
    total = 0
    for g in range(g_width):
        total += gpu_free[n, g]
    idle[n] = total
    acc = 0.0
    for m in range(wmilli.shape[0]):
        d = wmilli[m]
        f = 0
        s = 0
        for g in range(g_width):
            r = gpu_free[n, g]
            if r >= d:
                f += 1
            else:
                s += r
        fit[n, m] = f
        small[n, m] = s
        acc += _type_frag(access[n, m], f, wcount[m], cpu_free[n], wcpu[m], s, total) * weight[m]
    frag[n] = acc / wsum[0]
    seen[n] = version[n]


@plain(inline=True)
def _sigmoid_score(delta):
    return math.floor(100.0 / (1.0 + math.exp(-delta / 1000.0)))


@plain(inline=True)
def score_node(n, t, st, mt, tb):
    """(key, gpu) of node n for shape t: FGD's score × 1000 (+1 for keep-whole on a node in use)
    plus the tie fraction, or -1 when the shape does not fit; gpu = the share's GPU or -1."""
    gpu_free, cpu_free, mem_free, version, schedulable, exclusive, model, gpu_count, dc = st
    fit, small, idle, frag, seen, access, wmilli, wcpu, wcount, weight, wsum = mt
    order, shapes, allowed = tb[3], tb[4], tb[5]
    c, mem, k, milli, keep_whole = (
        shapes[t, 0],
        shapes[t, 1],
        shapes[t, 2],
        shapes[t, 3],
        shapes[t, 4],
    )
    if not schedulable[n] or exclusive[n] or cpu_free[n] < c or mem_free[n] < mem:
        return -1.0, -1
    if shapes[t, 5] != -1 and dc[n] != shapes[t, 5]:
        return -1.0, -1
    g_width = gpu_free.shape[1]
    if k > 0:
        fitting = 0
        for g in range(g_width):
            if gpu_free[n, g] >= milli:
                fitting += 1
        if fitting < k or not allowed[t, model[n]]:
            return -1.0, -1
    if seen[n] != version[n]:
        refresh_node(n, st, mt)
    before = frag[n]
    cpu = cpu_free[n] - c
    idle_after = idle[n] - k * milli
    n_types = wmilli.shape[0]
    best = -1.0
    best_gpu = -1
    if k == 1 and milli < MILLI:
        for g in range(g_width):
            r0 = gpu_free[n, g]
            if r0 < milli:
                continue
            repeat = False
            for h in range(g):
                if gpu_free[n, h] == r0:
                    repeat = True
                    break
            if repeat:
                continue
            r1 = r0 - milli
            acc = 0.0
            for m in range(n_types):
                d = wmilli[m]
                f = fit[n, m] - (1.0 if r0 >= d else 0.0) + (1.0 if r1 >= d else 0.0)
                s = small[n, m] - (r0 if r0 < d else 0) + (r1 if r1 < d else 0)
                acc += (
                    _type_frag(access[n, m], f, wcount[m], cpu, wcpu[m], s, idle_after) * weight[m]
                )
            score = _sigmoid_score(before - acc / wsum[0])
            if score > best:
                best = score
                best_gpu = g
    else:
        acc = 0.0
        for m in range(n_types):
            f = fit[n, m] - (k if wmilli[m] <= MILLI else 0)
            acc += (
                _type_frag(access[n, m], f, wcount[m], cpu, wcpu[m], small[n, m], idle_after)
                * weight[m]
            )
        best = _sigmoid_score(before - acc / wsum[0])
    value = best * 1000.0
    if keep_whole and k > 0:
        free = 0
        for g in range(g_width):
            free += gpu_free[n, g]
        if free != gpu_count[n] * MILLI:
            value += 1.0
    return value + order[n], best_gpu


@plain()
def best_node(t, st, mt, tb):
    """Rescore the stale entries of column t; the node with the highest key, or -1 if none fits."""
    version = st[3]
    key, gpu, stamp = tb[0], tb[1], tb[2]
    arg = -1
    top = -1.0
    for n in range(version.shape[0]):
        if stamp[t, n] != version[n]:
            key[t, n], gpu[t, n] = score_node(n, t, st, mt, tb)
            stamp[t, n] = version[n]
        if key[t, n] > top:
            top = key[t, n]
            arg = n
    return arg


@plain()
def _take(n, t, st, tb, gpus, sign):
    """Apply (sign -1) or give back (+1) shape t on node n, GPUs in `gpus` (length k)."""
    gpu_free, cpu_free, mem_free = st[0], st[1], st[2]
    shapes = tb[4]
    cpu_free[n] += sign * shapes[t, 0]
    mem_free[n] += sign * shapes[t, 1]
    for i in range(gpus.shape[0]):
        gpu_free[n, gpus[i]] += sign * shapes[t, 3]


@plain()
def _gpus_for(n, t, st, tb, out):
    """The GPUs shape t takes on node n: the share's scored GPU, else the first k whole free."""
    gpu_free = st[0]
    gpu, shapes = tb[1], tb[4]
    k, milli = shapes[t, 2], shapes[t, 3]
    if k == 1 and milli < MILLI:
        out[0] = gpu[t, n]
        return 1
    taken = 0
    for g in range(gpu_free.shape[1]):
        if taken == k:
            break
        if gpu_free[n, g] == MILLI:
            out[taken] = g
            taken += 1
    return taken


@nb.njit(cache=True)
def rollout(first_node, first_t, future, st, mt, tb):
    """Place shape `first_t` on `first_node`, then each shape of `future` by FGD where it fits;
    return (GPU milli the future placed, the cluster's F(M) after, summed exactly).

    Everything is left as it was, caches included: a node's cache rows (scores of every shape,
    meter statistics) are saved when the rollout first touches it and put back at the end, so
    the next rollout rescores only what it touches itself. While it runs, touched nodes carry
    fresh unique versions (from `counter`, above anything `FleetState` counts to)."""
    version = st[3]
    fit, small, idle, frag, seen = mt[0], mt[1], mt[2], mt[3], mt[4]
    key, gpu, stamp, counter = tb[0], tb[1], tb[2], tb[6]
    steps = future.shape[0] + 1
    g_width = st[0].shape[1]
    nodes = np.empty(steps, dtype=np.int64)
    kinds = np.empty(steps, dtype=np.int64)
    old_versions = np.empty(steps, dtype=np.int64)
    taken = np.empty((steps, g_width), dtype=np.int64)
    counts = np.empty(steps, dtype=np.int64)
    # cache rows of each node as it was before its first touch
    saved = np.empty(steps, dtype=np.int64)
    saved_key = np.empty((steps, key.shape[0]))
    saved_gpu = np.empty((steps, key.shape[0]), dtype=np.int64)
    saved_stamp = np.empty((steps, key.shape[0]), dtype=np.int64)
    saved_fit = np.empty((steps, fit.shape[1]))
    saved_small = np.empty((steps, fit.shape[1]))
    saved_scalars = np.empty((steps, 3))  # idle, frag, seen
    n_saved = 0
    done = 0
    volume = 0
    for i in range(steps):
        if i == 0:
            t = first_t
            n = first_node
            if stamp[t, n] != version[n]:
                key[t, n], gpu[t, n] = score_node(n, t, st, mt, tb)
                stamp[t, n] = version[n]
        else:
            t = future[i - 1]
            n = best_node(t, st, mt, tb)
            if n < 0:
                continue
        if version[n] < ROLLOUT_VERSIONS:  # first touch: keep the rows to put back
            if seen[n] != version[n]:
                refresh_node(n, st, mt)
            saved[n_saved] = n
            saved_key[n_saved] = key[:, n]
            saved_gpu[n_saved] = gpu[:, n]
            saved_stamp[n_saved] = stamp[:, n]
            saved_fit[n_saved] = fit[n]
            saved_small[n_saved] = small[n]
            saved_scalars[n_saved, 0] = idle[n]
            saved_scalars[n_saved, 1] = frag[n]
            saved_scalars[n_saved, 2] = seen[n]
            n_saved += 1
        counts[done] = _gpus_for(n, t, st, tb, taken[done])
        _take(n, t, st, tb, taken[done, : counts[done]], -1)
        nodes[done] = n
        kinds[done] = t
        old_versions[done] = version[n]
        counter[0] += 1
        version[n] = counter[0]
        if i > 0:
            volume += tb[4][t, 2] * tb[4][t, 3]
        done += 1
    wsum = mt[10][0]
    total = 0.0  # Σ F_n·wsum: integer-valued, so equal fragmentation compares equal
    for n in range(version.shape[0]):
        if seen[n] != version[n]:
            refresh_node(n, st, mt)
        total += round(frag[n] * wsum)
    for j in range(done - 1, -1, -1):
        n = nodes[j]
        _take(n, kinds[j], st, tb, taken[j, : counts[j]], 1)
        version[n] = old_versions[j]
    for j in range(n_saved):
        n = saved[j]
        key[:, n] = saved_key[j]
        gpu[:, n] = saved_gpu[j]
        stamp[:, n] = saved_stamp[j]
        fit[n] = saved_fit[j]
        small[n] = saved_small[j]
        idle[n] = saved_scalars[j, 0]
        frag[n] = saved_scalars[j, 1]
        seen[n] = np.int64(saved_scalars[j, 2])
    return volume, total / wsum
