"""The price book's lookups when versions share an instant."""

from datetime import UTC, datetime, timedelta

from cardhour.core.money import Money
from cardhour.core.pricing import PriceHistory, PriceVersion

T0 = datetime(2026, 4, 1, tzinfo=UTC)


def _history(*prices: tuple[str, int]) -> PriceHistory:
    return PriceHistory(
        [PriceVersion("H100", "bj1", Money.parse(p), T0 + timedelta(seconds=s)) for p, s in prices]
    )


def test_of_two_versions_from_one_instant_the_later_set_is_in_force_and_is_the_change():
    # regression: next_change gave the first of the two, so a running segment was repriced at a
    # price that never applied (the property test charged 7.77 where 60.00 was in force)
    book = _history(("0.60", 0), ("7.77", 60), ("60.00", 60), ("1.90", 120))
    assert book.at("H100", "bj1", T0 + timedelta(seconds=60)) == Money.parse("60.00")
    change = book.next_change("H100", "bj1", T0, T0 + timedelta(hours=1))
    assert change is not None
    assert (change.effective_from, change.price) == (T0 + timedelta(seconds=60), Money.parse("60"))
    after = book.next_change("H100", "bj1", change.effective_from, T0 + timedelta(hours=1))
    assert after is not None and after.price == Money.parse("1.90")


def test_next_change_is_none_past_until_and_at_its_own_start():
    book = _history(("0.60", 0), ("7.77", 60))
    assert book.next_change("H100", "bj1", T0, T0 + timedelta(seconds=59)) is None
    assert (
        book.next_change("H100", "bj1", T0 + timedelta(seconds=60), T0 + timedelta(hours=1)) is None
    )
