"""An agent's spend cap, in a module of its own: choir-agent reads it from its live config, and
importing it from `choir.config.model` loaded the whole config tree (~9 ms of the agent's start)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from choir.config.base import ConfigModel
from choir.config.resources import Usd


class SpendCap(ConfigModel):
    """The most an agent may spend on LLM calls; at a cap its next call is not made."""

    day_usd: Annotated[Usd, Field(gt=0.0)] | None = None
    """Per UTC day; null: no daily cap."""
    month_usd: Annotated[Usd, Field(gt=0.0)] | None = None
    """Per UTC calendar month; null: no monthly cap."""
