"""The versioned price book: which on-demand price applies to a GPU model in a data centre at a
moment, and when it changes.

Contract: a version applies to usage from its `effective_from` on (inclusive) until the next
version of the same (model, data centre) key. Before the first version there is no price.
Prices are per card-hour; the monthly plan is the on-demand price less the catalog's discount.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from cardhour.core.errors import NotFound
from cardhour.core.money import Money

Key = tuple[str, str]  # (gpu model id, data centre id)


@dataclass(frozen=True)
class PriceVersion:
    gpu_model: str
    data_centre: str
    price: Money  # on-demand, per card-hour
    effective_from: datetime


class PriceHistory:
    """All versions, per key, sorted by `effective_from`. Pure; built once per transaction."""

    def __init__(self, versions: Iterable[PriceVersion], monthly_discount_percent: int = 35):
        by_key: dict[Key, list[PriceVersion]] = defaultdict(list)
        for v in versions:
            by_key[(v.gpu_model, v.data_centre)].append(v)
        self._versions = {k: sorted(vs, key=lambda v: v.effective_from) for k, vs in by_key.items()}
        self._starts = {k: [v.effective_from for v in vs] for k, vs in self._versions.items()}
        self.monthly_discount_percent = monthly_discount_percent

    def price_keys(self) -> list[Key]:
        return sorted(self._versions)

    def data_centres(self, gpu_model: str) -> list[str]:
        return sorted(dc for model, dc in self._versions if model == gpu_model)

    def versions(self, gpu_model: str, data_centre: str) -> list[PriceVersion]:
        return list(self._versions.get((gpu_model, data_centre), []))

    def at(self, gpu_model: str, data_centre: str, when: datetime) -> Money:
        """The on-demand price in force at `when`; NotFound when there is none."""
        key = (gpu_model, data_centre)
        i = bisect.bisect_right(self._starts.get(key, []), when) - 1
        if i < 0:
            raise NotFound(f"no price for {gpu_model} in {data_centre}")
        return self._versions[key][i].price

    def version_at(self, gpu_model: str, data_centre: str, when: datetime) -> PriceVersion | None:
        key = (gpu_model, data_centre)
        i = bisect.bisect_right(self._starts.get(key, []), when) - 1
        return self._versions[key][i] if i >= 0 else None

    def monthly_at(self, gpu_model: str, data_centre: str, when: datetime) -> Money:
        """Per card-hour on the monthly plan at `when`."""
        return self.at(gpu_model, data_centre, when).percent_off(self.monthly_discount_percent)

    def next_change(
        self, gpu_model: str, data_centre: str, after: datetime, until: datetime
    ) -> PriceVersion | None:
        """The version in force from the first change with `after < effective_from <= until`,
        if any (of several from the same instant, the last set, as `at` gives)."""
        key = (gpu_model, data_centre)
        starts = self._starts.get(key, [])
        i = bisect.bisect_right(starts, after)
        if i < len(starts) and starts[i] <= until:
            return self._versions[key][bisect.bisect_right(starts, starts[i]) - 1]
        return None

    def highest(self, gpu_model: str, data_centres: Iterable[str], when: datetime) -> Money:
        """The dearest price of `gpu_model` among `data_centres` at `when` (what a launch that
        may land in any of them is held and quoted at)."""
        prices = []
        for dc in data_centres:
            try:
                prices.append(self.at(gpu_model, dc, when))
            except NotFound:
                continue
        if not prices:
            raise NotFound(f"no price for {gpu_model}")
        return max(prices)
