"""The named policies. The six baselines follow shared/docs/FGD_BENCHMARK.md §4 exactly; each is
its paper's only score plugin with weight 1000 (a tie among equal scores goes to the tie order)."""

from __future__ import annotations

from cardhour.scheduler import fgd, scores  # noqa: F401  (registers the score plugins)
from cardhour.scheduler.framework import Profile, register_profile

BASELINES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")

register_profile(Profile("random", (("random", 1000),), share_gpu="random"))
register_profile(Profile("dotprod", (("dotprod", 1000),)))
register_profile(Profile("clustering", (("clustering", 1000),)))
register_profile(Profile("packing", (("packing", 1000),)))
register_profile(Profile("bestfit", (("bestfit", 1000),)))
register_profile(Profile("fgd", (("fgd", 1000),), share_gpu="plugin", needs_workload=True))

# Our own policy; `cardhour simulate` and the control plane use it unless told otherwise.
DEFAULT_POLICY = "fgd"
