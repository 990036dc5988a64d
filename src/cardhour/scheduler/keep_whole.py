"""`keep-whole`: among equally good nodes, a GPU container goes to a node whose GPUs are already
in use, so nodes with no GPU taken stay whole for bare metal, gangs and 8-GPU containers.

Used with weight 1 under FGD's weight 1000, it only breaks FGD's ties (its score is 0 or 1,
FGD's steps are 1000). CPU-only containers score 0 everywhere: they keep FGD's order.
"""

from __future__ import annotations

import numpy as np

from cardhour.scheduler.framework import Context, Scored, register_score
from cardhour.scheduler.request import MILLI, Request


@register_score("keep-whole")
class KeepWholeScore:
    name = "keep-whole"

    def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
        if req.num_gpu == 0:
            return Scored(np.zeros(len(nodes)))
        s = ctx.state
        untouched = s.gpu_free[nodes].sum(axis=1) == s.gpu_count[nodes] * MILLI
        return Scored((~untouched).astype(np.float64))
