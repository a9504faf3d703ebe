"""Which price an LLM call is costed at (`choir.agent.lanes.spend.price_of`), which cap it
is checked against."""

from __future__ import annotations

from choir.agent.lanes.spend import FREE, SpendMeter, price_of
from choir.agent.replication.live_config import DynamicConfig
from choir.config.llm import ModelPrice
from choir.protocol import SpendSoFar

PRICE = {"prompt": 3.0, "completion": 15.0}


def config(**models: dict[str, object]) -> DynamicConfig:
    return DynamicConfig.of(1, {"models": models})


def test_a_configured_price_is_the_price() -> None:
    found = price_of(config(sonnet={"provider": "openrouter", "price": PRICE}), "sonnet")
    assert found == ModelPrice(prompt=3.0, completion=15.0)


def test_a_real_model_without_a_price_costs_unknown_never_zero() -> None:
    assert (
        price_of(config(sonnet={"provider": "openrouter", "endpoint": "https://x"}), "sonnet")
        is None
    )
    assert price_of(config(), "sonnet") is None


def test_the_built_in_demo_model_is_free_but_a_scripted_server_is_not() -> None:
    """The quickstart's demo model runs inside choir-agent: `choirctl usage` shows $0 for it,
    not "unknown cost"; a scripted model served over HTTP is priced like any other."""
    assert price_of(config(demo={"provider": "scripted", "endpoint": None}), "demo") == FREE
    served = {"provider": "scripted", "endpoint": "http://127.0.0.1:9/v1"}
    assert price_of(config(demo=served), "demo") is None
    priced = {"provider": "scripted", "endpoint": None, "price": PRICE}
    assert price_of(config(demo=priced), "demo") == ModelPrice(prompt=3.0, completion=15.0)


def test_each_config_snapshot_is_read_anew() -> None:
    """Prices and caps are read once per snapshot: a reload (a new snapshot) applies at the next
    call, and each model of one snapshot keeps its own price."""
    cheap = {"provider": "openrouter", "price": {"prompt": 1.0, "completion": 2.0}}
    first = config(sonnet={"provider": "openrouter", "price": PRICE}, haiku=cheap)
    assert price_of(first, "sonnet") == ModelPrice(prompt=3.0, completion=15.0)
    assert price_of(first, "haiku") == ModelPrice(prompt=1.0, completion=2.0)
    assert price_of(first, "sonnet") == ModelPrice(prompt=3.0, completion=15.0)
    dearer = {"provider": "openrouter", "price": {"prompt": 5.0, "completion": 25.0}}
    reloaded = config(sonnet=dearer)
    assert price_of(reloaded, "sonnet") == ModelPrice(prompt=5.0, completion=25.0)
    assert price_of(reloaded, "haiku") is None


def test_a_raised_spend_cap_applies_at_the_next_check() -> None:
    meter = SpendMeter("agent-1")
    meter.begin("agent-1", SpendSoFar(day=meter.spent.day, day_usd=2.0, month_usd=2.0))
    capped = DynamicConfig.of(1, {"spend_cap": {"day_usd": 1.0}})
    refused = meter.refusal(capped)
    assert refused is not None
    assert refused.reached.period == "day"
    assert meter.refusal(capped) is not None
    assert meter.refusal(DynamicConfig.of(2, {"spend_cap": {"day_usd": 3.0}})) is None
    assert meter.refusal(DynamicConfig.of(3, {})) is None
