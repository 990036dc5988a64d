"""The plugin framework, in the style of the Kubernetes scheduler framework.

- A filter yields `(reason, failing_mask)` pairs over all nodes; a node is reported under the
  first reason that rejects it, so a pending request carries "0/40 nodes: 31 insufficient GPU,
  9 wrong GPU model".
- A score plugin returns one value per candidate node (higher is better) and may also choose
  the GPU inside each node (FGD does, for GPU-sharing requests).
- A profile names the score plugins with weights and the in-node GPU choice; profiles and plugins
  are looked up by name in registries, so settings pick a profile by name.
The winning node has the highest weighted sum; ties go to the lowest `tie_rank` (the node order
by default; a seeded permutation in trace replay, as the FGD authors' simulator does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from cardhour.scheduler.fgd.lookahead import Lookahead
from cardhour.scheduler.frag import FragMeter, TypicalWorkload
from cardhour.scheduler.request import Request
from cardhour.scheduler.state import FleetState


@dataclass
class Context:
    """What plugins see for one decision: the fleet, randomness, the typical workload."""

    state: FleetState
    rng: np.random.Generator
    workload: TypicalWorkload | None = None
    _meter: FragMeter | None = field(default=None, repr=False)

    def meter(self) -> FragMeter:
        if self.workload is None:
            raise ValueError("this policy needs a typical workload (FGD's target workload M)")
        if self._meter is None or self._meter.state is not self.state:
            self._meter = FragMeter(self.state, self.workload)
        self._meter.refresh()
        return self._meter


class FilterPlugin(Protocol):
    name: str

    def filter(self, ctx: Context, req: Request) -> Iterable[tuple[str, np.ndarray]]:
        """Yield (reason, mask of nodes this reason rejects)."""
        ...


@dataclass(frozen=True)
class Scored:
    values: np.ndarray  # one per candidate node
    gpus: np.ndarray | None = None  # chosen GPU per candidate (GPU-sharing requests), or None


class ScorePlugin(Protocol):
    name: str

    def score(self, ctx: Context, req: Request, nodes: np.ndarray) -> Scored:
        """Score the candidate `nodes` (indices into the state); higher is better."""
        ...


SCORE_PLUGINS: dict[str, Callable[[], ScorePlugin]] = {}


def register_score(name: str) -> Callable[[Callable[[], ScorePlugin]], Callable[[], ScorePlugin]]:
    def add(factory: Callable[[], ScorePlugin]) -> Callable[[], ScorePlugin]:
        SCORE_PLUGINS[name] = factory
        return factory

    return add


@dataclass(frozen=True)
class Profile:
    """A named scheduling policy: score plugins with weights and how a shared GPU is chosen.

    `share_gpu`: "best" (the fitting GPU with the least free milli), "random", or "plugin"
    (the choice the first score plugin returns). `lookahead`: near saturation, try FGD's best
    few nodes in rollouts (lookahead.py); only for FGD profiles (see `fgd_table_mode`).
    """

    name: str
    scores: tuple[tuple[str, int], ...]
    share_gpu: str = "best"
    needs_workload: bool = False
    description: str = ""
    lookahead: Lookahead | None = None

    def fgd_table_mode(self) -> bool | None:
        """Whether `FgdTable` makes this profile's container decisions: None if it cannot (the
        scores are not FGD's), else its `keep_whole` flag (FGD alone, or with keep-whole ties)."""
        if self.share_gpu != "plugin":
            return None
        if self.scores == (("fgd", 1000),):
            return False
        if self.scores == (("fgd", 1000), ("keep-whole", 1)):
            return True
        return None


PROFILES: dict[str, Profile] = {}


def register_profile(profile: Profile) -> Profile:
    unknown = [name for name, _ in profile.scores if name not in SCORE_PLUGINS]
    if unknown:
        raise ValueError(f"profile {profile.name}: unknown score plugins {unknown}")
    if profile.lookahead is not None and profile.fgd_table_mode() is None:
        raise ValueError(f"profile {profile.name}: lookahead needs FGD's scores")
    PROFILES[profile.name] = profile
    return profile


def profile_named(name: str) -> Profile:
    """The registered profile `name`. The named profiles register when `profiles` is imported,
    which the package's `__init__` does, so importing any module of the package is enough."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown scheduling policy {name!r}; known: {known}") from None
