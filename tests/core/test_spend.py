"""`choir.core.spend`: a call's cost (provider's, else the price, else unknown) and the caps."""

from __future__ import annotations

import pytest

from choir.config.llm import ModelPrice, SpendCap
from choir.core.spend import (
    CapReached,
    Cost,
    Granted,
    Spent,
    call_cost,
    cap_reached,
    cap_refusal,
    usd,
)

PRICE = ModelPrice(prompt=2.0, completion=10.0, cached=0.5)


@pytest.mark.parametrize(
    ("price", "reported", "expected"),
    [
        (PRICE, 0.0123, Cost(0.0123, "provider")),  # the provider's figure wins
        (None, 0.0, Cost(0.0, "provider")),  # a reported 0 is a known 0 (a free model)
        (PRICE, None, Cost((600 * 2.0 + 400 * 0.5 + 200 * 10.0) / 1e6, "price")),
        (ModelPrice(prompt=2.0, completion=10.0), None, Cost((1000 * 2.0 + 2000) / 1e6, "price")),
        (None, None, Cost(None, None)),  # unknown, never 0
    ],
)
def test_a_calls_cost_prefers_the_provider_then_the_price(
    price: ModelPrice | None, reported: float | None, expected: Cost
) -> None:
    cost = call_cost(
        price, prompt_tokens=1000, completion_tokens=200, cached_tokens=400, reported_usd=reported
    )
    assert cost.source == expected.source
    assert cost.usd == pytest.approx(expected.usd)


def test_cached_tokens_beyond_the_prompt_are_not_billed_twice() -> None:
    cost = call_cost(PRICE, prompt_tokens=10, completion_tokens=0, cached_tokens=50)
    assert cost.usd == pytest.approx(10 * 0.5 / 1e6)


@pytest.mark.parametrize(
    ("spent", "day", "expected"),
    [
        (Spent("2026-11-27", 1.0, 5.0), "2026-11-27", Spent("2026-11-27", 1.0, 5.0)),
        (Spent("2026-11-27", 1.0, 5.0), "2026-11-28", Spent("2026-11-28", 0.0, 5.0)),
        (Spent("2026-11-30", 1.0, 5.0), "2026-12-01", Spent("2026-12-01", 0.0, 0.0)),
    ],
)
def test_spend_seen_from_a_later_day_starts_that_day_and_month_at_zero(
    spent: Spent, day: str, expected: Spent
) -> None:
    assert spent.at(day) == expected


def test_an_unknown_cost_adds_nothing() -> None:
    assert Spent("2026-11-27", 1.0, 2.0).plus("2026-11-27", None) == Spent("2026-11-27", 1.0, 2.0)
    assert Spent("2026-11-27", 1.0, 2.0).plus("2026-11-27", 0.5) == Spent("2026-11-27", 1.5, 2.5)


@pytest.mark.parametrize(
    ("cap", "spent", "period"),
    [
        (None, Spent("2026-11-27", 99.0, 99.0), None),
        (SpendCap(), Spent("2026-11-27", 99.0, 99.0), None),
        (SpendCap(day_usd=5), Spent("2026-11-27", 4.99, 40.0), None),
        (SpendCap(day_usd=5), Spent("2026-11-27", 5.0, 5.0), "day"),
        (SpendCap(day_usd=5, month_usd=20), Spent("2026-11-27", 1.0, 20.0), "month"),
        (SpendCap(day_usd=5, month_usd=20), Spent("2026-11-27", 6.0, 21.0), "day"),
    ],
)
def test_the_cap_reached_is_named_with_how_to_raise_it(
    cap: SpendCap | None, spent: Spent, period: str | None
) -> None:
    why = cap_refusal("agent-1", cap, spent)
    if period is None:
        assert why is None
        return
    assert why is not None
    assert why.startswith("spend cap reached: agent agent-1 has spent $")
    assert f"agents.agent-1.spend_cap.{period}_usd" in why
    assert "choirctl config apply" in why
    assert "\n" not in why


def test_amounts_read_as_people_read_them() -> None:
    assert (usd(0.0034), usd(1234.5), usd(0.0)) == ("$0.0034", "$1,234.50", "$0.0000")


def test_a_grant_raises_its_periods_cap_until_the_period_ends() -> None:
    cap = SpendCap(day_usd=5, month_usd=20)
    spent = Spent("2026-11-27", 5.5, 10.0)
    assert cap_reached(cap, spent) == CapReached("day", 5.0, 5.5)
    granted = Granted("2026-11-27").plus("2026-11-27", "day", 1.0)
    assert cap_reached(cap, spent, granted) is None  # $1 beyond today's cap
    assert cap_reached(cap, Spent("2026-11-27", 6.0, 11.0), granted) == CapReached(
        "day", 6.0, 6.0, 1.0
    )
    why = cap_refusal("agent-1", cap, Spent("2026-11-27", 6.0, 11.0), granted)
    assert why is not None
    assert "agents.agent-1.spend_cap.day_usd is $5.00 (+$1.00 granted)" in why
    # the next day starts with nothing granted for the day; a month's grant lasts the month
    monthly = granted.plus("2026-11-27", "month", 5.0)
    assert monthly.at("2026-11-28") == Granted("2026-11-28", 0.0, 5.0)
    assert monthly.at("2026-12-01") == Granted("2026-12-01", 0.0, 0.0)
    assert cap_reached(cap, Spent("2026-11-28", 1.0, 24.0), monthly) is None
    assert cap_reached(cap, Spent("2026-11-28", 1.0, 25.0), monthly) == CapReached(
        "month", 25.0, 25.0, 5.0
    )
    assert CapReached("month", 25.0, 25.0).budget == "spend_cap_month_usd"
