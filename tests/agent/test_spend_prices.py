"""Which price an LLM call is costed at (`choir.agent.lanes.spend.price_of`)."""

from __future__ import annotations

from choir.agent.lanes.spend import FREE, price_of
from choir.agent.replication.live_config import DynamicConfig
from choir.config.resources import ModelPrice

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
