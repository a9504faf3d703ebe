"""What an LLM call cost, and whether an agent's spend cap lets it make the next one.

Pure: the agent's meter (`choir.agent.lanes.spend`) feeds it figures and a clock reading.

Cost: the provider's own figure when it reports one (OpenRouter's `usage.cost` knows routing,
discounts and cache writes that a price list cannot), else the tokens at `models.<name>.price`
(per million; cached prompt tokens at the `cached` price when one is set); else unknown —
never 0, so an unpriced model is never shown as free.

Caps are per UTC day and per UTC calendar month. Calls of unknown cost cannot count towards a
cap. `cap_reached` is the one place the decision is made; a lane that may ask turns it into a
question to a human (`Granted`: what the answers allowed beyond the cap), else into
`cap_refusal`'s one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from choir.config.llm import ModelPrice, SpendCap

CostSource = Literal["provider", "price"]

PER_MILLION = 1_000_000
TTS_TOOL: Final = "choir.tts.speak"
"""The tool whose results carry a TTS call's usage (`choir.agent.integrations.tts`)."""


@dataclass(frozen=True, slots=True)
class Cost:
    """A call's cost in USD and where it came from; `usd` None means unknown."""

    usd: float | None
    source: CostSource | None


def call_cost(
    price: ModelPrice | None,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
    reported_usd: float | None = None,
) -> Cost:
    """The cost of one call (see the module's docstring for the order of preference)."""
    if reported_usd is not None:
        return Cost(reported_usd, "provider")
    if price is None:
        return Cost(None, None)
    cached = min(cached_tokens, prompt_tokens)
    cached_price = price.cached if price.cached is not None else price.prompt
    usd = (
        (prompt_tokens - cached) * price.prompt
        + cached * cached_price
        + completion_tokens * price.completion
    ) / PER_MILLION
    return Cost(usd, "price")


@dataclass(frozen=True, slots=True)
class TtsBilled:
    """What a TTS call was billed, as its tool result says."""

    characters: int
    model_id: str
    cost: Cost


def tts_billed(event: Mapping[str, Any]) -> TtsBilled | None:
    """The usage in a committed `tool_result_committed` event (JSON) of `choir.tts.speak`,
    when the provider answered (its data holds the characters); None for any other event."""
    if event.get("kind") != "tool_result_committed" or event.get("tool") != TTS_TOOL:
        return None
    data = (event.get("result") or {}).get("data") or {}
    characters, usd = data.get("characters"), data.get("cost_usd")
    if type(characters) is not int or characters < 0:  # not billed, or from before usage
        return None
    cost = Cost(None, None)
    if isinstance(usd, int | float) and usd >= 0 and data.get("cost_source") == "price":
        cost = Cost(float(usd), "price")
    return TtsBilled(characters, str(data.get("model_id") or "tts"), cost)


def day_of(at: datetime) -> str:
    """The UTC day a moment falls in, `YYYY-MM-DD` (caps and `usage --by day` use it).

    `date().isoformat()` rather than `strftime`: the agent asks at every model call, and it
    costs a fifth as much."""
    return at.date().isoformat()


def month_of(at: datetime) -> str:
    """The UTC calendar month a moment falls in, `YYYY-MM`."""
    return at.strftime("%Y-%m")


@dataclass(frozen=True, slots=True)
class Spent:
    """An agent's known spend in one UTC day and the month holding it."""

    day: str
    """`YYYY-MM-DD`."""
    day_usd: float = 0.0
    month_usd: float = 0.0

    @property
    def month(self) -> str:
        return self.day[:7]

    def at(self, day: str) -> Spent:
        """These figures seen from `day`: a new day starts at 0, a new month too."""
        if day == self.day:
            return self
        return Spent(day, 0.0, self.month_usd if day[:7] == self.month else 0.0)

    def plus(self, day: str, usd: float | None) -> Spent:
        """After a call on `day` costing `usd` (unknown adds nothing)."""
        moved = self.at(day)
        if usd is None:
            return moved
        return Spent(day, moved.day_usd + usd, moved.month_usd + usd)


def usd(amount: float) -> str:
    """An amount as people read it: cents from a dollar up, four decimals below (`$0.0034`)."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


Period = Literal["day", "month"]


@dataclass(frozen=True, slots=True)
class Granted:
    """Spend a human allowed beyond an agent's caps (issue 19's budgets that ask): for one UTC
    day and for the month holding it; a new day (month) starts with nothing granted."""

    day: str
    """`YYYY-MM-DD`."""
    day_usd: float = 0.0
    month_usd: float = 0.0

    def at(self, day: str) -> Granted:
        if day == self.day:
            return self
        return Granted(day, 0.0, self.month_usd if day[:7] == self.day[:7] else 0.0)

    def plus(self, day: str, period: Period, usd: float) -> Granted:
        """After `usd` more was granted on `day` for `period`."""
        moved = self.at(day)
        if period == "day":
            return Granted(day, moved.day_usd + usd, moved.month_usd)
        return Granted(day, moved.day_usd, moved.month_usd + usd)


@dataclass(frozen=True, slots=True)
class CapReached:
    """A cap the next call must not pass: its period, its limit (grants included), the spend."""

    period: Period
    limit_usd: float
    spent_usd: float
    granted_usd: float = 0.0

    @property
    def budget(self) -> str:
        """The name a question to extend it gives (`spend_cap_day_usd`)."""
        return f"spend_cap_{self.period}_usd"


def cap_reached(
    cap: SpendCap | None, spent: Spent, granted: Granted | None = None
) -> CapReached | None:
    """The first cap (day, then month) `spent` has reached, counting what was `granted` on top
    of it; None when the next call may be made."""
    if cap is None:
        return None
    extra = granted.at(spent.day) if granted is not None else Granted(spent.day)
    checks: tuple[tuple[Period, float, float | None, float], ...] = (
        ("day", spent.day_usd, cap.day_usd, extra.day_usd),
        ("month", spent.month_usd, cap.month_usd, extra.month_usd),
    )
    for period, figure, limit, more in checks:
        if limit is not None and figure >= limit + more:
            return CapReached(period, limit + more, figure, more)
    return None


def cap_refusal(
    agent_id: str, cap: SpendCap | None, spent: Spent, granted: Granted | None = None
) -> str | None:
    """Why the next LLM call must not be made (one line naming the cap and how to raise it),
    or None when no cap is reached."""
    reached = cap_reached(cap, spent, granted)
    if reached is None:
        return None
    period, figure = reached.period, reached.spent_usd
    when = f"today ({spent.day} UTC)" if period == "day" else f"this month ({spent.month} UTC)"
    configured = usd(reached.limit_usd - reached.granted_usd)
    base = f"agents.{agent_id}.spend_cap.{period}_usd is {configured}"
    if reached.granted_usd:
        base += f" (+{usd(reached.granted_usd)} granted)"
    return (
        f"spend cap reached: agent {agent_id} has spent {usd(figure)} {when}, its cap "
        f"{base}; no model call is made until the {period} ends or the cap is raised (edit "
        f"config.json, then choirctl config load and choirctl config apply)"
    )
