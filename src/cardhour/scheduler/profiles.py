"""The named policies. The six baselines follow shared/docs/FGD_BENCHMARK.md §4 exactly; each is
its paper's only score plugin with weight 1000 (a tie among equal scores goes to the tie order)."""

from __future__ import annotations

from dataclasses import replace

from cardhour.scheduler import keep_whole, scores  # noqa: F401  (registers the score plugins)
from cardhour.scheduler.fgd import score as fgd  # noqa: F401  (registers the score plugins)
from cardhour.scheduler.fgd.lookahead import Lookahead
from cardhour.scheduler.framework import Profile, register_profile

BASELINES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")

register_profile(Profile("random", (("random", 1000),), share_gpu="random"))
register_profile(Profile("dotprod", (("dotprod", 1000),)))
register_profile(Profile("clustering", (("clustering", 1000),)))
register_profile(Profile("packing", (("packing", 1000),)))
register_profile(Profile("bestfit", (("bestfit", 1000),)))
register_profile(Profile("fgd", (("fgd", 1000),), share_gpu="plugin", needs_workload=True))

# FGD, and among FGD's ties a GPU container joins a node already in use rather than opening an
# untouched one (keep_whole.py). In-node GPU choice is topology-aware for every policy (gpusel.py).
FGD_KEEP_WHOLE = register_profile(
    Profile(
        "fgd-keep-whole",
        (("fgd", 1000), ("keep-whole", 1)),
        share_gpu="plugin",
        needs_workload=True,
        description="FGD; ties go to nodes already in use, keeping untouched nodes whole",
    )
)

# Ours: fgd-keep-whole, and each container is tried on FGD's best nodes in rollouts of pods
# drawn from the typical workload (lookahead.py; its defaults are the settings).
# docs/benchmarks/scheduler.md has what it gains and costs, and what else was tried.
_LOOKAHEAD = Lookahead()
register_profile(
    replace(
        FGD_KEEP_WHOLE,
        name="cardhour",
        description=(
            f"fgd-keep-whole; each container is tried on FGD's best {_LOOKAHEAD.candidates} "
            f"nodes in rollouts of {_LOOKAHEAD.horizon} pods of the typical workload "
            f"({_LOOKAHEAD.share_samples} per node for a GPU share)"
        ),
        lookahead=_LOOKAHEAD,
    )
)

# `cardhour simulate` and the control plane use it unless told otherwise.
DEFAULT_POLICY = "cardhour"
