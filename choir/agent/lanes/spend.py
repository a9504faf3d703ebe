"""The agent's spend meter: each LLM call's cost recorded as an `llm_call` event, caps checked.

Every call a lane makes goes through `LaneKit.complete`, which asks `refusal()` before calling
and `record()` after: one place, so a later "ask to extend" replaces the refusal with a
question without touching any lane. The meter starts from the spend choird knew at INIT_HELLO
(every acknowledged call of the agent, all sessions) and adds this process's calls; the caps
come from the current config snapshot at each check, so a raised cap applies to the next call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Generic, Literal, TypeVar

from pydantic import ValidationError

from choir.adapters.llm.client import Completion
from choir.agent.replication.live_config import DynamicConfig
from choir.config.llm import ModelPrice, SpendCap
from choir.core.spend import (
    CapReached,
    Granted,
    Period,
    Spent,
    call_cost,
    cap_reached,
    cap_refusal,
    day_of,
    tts_billed,
)
from choir.errors import ChoirError, ExitCode
from choir.logs import get_logger
from choir.protocol import LlmCallRecorded, SpendSoFar

log = get_logger("choir.agent.spend")

Purpose = Literal["step", "summary", "compaction", "rollup"]


class SpendCapReached(ChoirError):
    """The agent's spend cap refuses the next LLM call; the message names the cap, `reached`
    says which (a lane asks a human to allow more)."""

    exit_code = ExitCode.CONFLICT

    def __init__(self, message: str, reached: CapReached) -> None:
        super().__init__(message)
        self.reached = reached


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SpendMeter:
    """One session's view of its agent's spend (see the module's docstring)."""

    def __init__(self, agent_id: str = "", clock: Callable[[], datetime] = _utc_now) -> None:
        self.agent_id = agent_id
        self._clock = clock
        self._spent = Spent(day_of(clock()))
        self._granted = Granted(day_of(clock()))
        """Spend humans allowed beyond the caps this session (a question answered)."""
        self._jobs: dict[str, str] = {}
        """The job id of each core lane that called: a compaction of that lane is the job's."""

    def begin(self, agent_id: str, so_far: SpendSoFar | None) -> None:
        """Start from what choird counted for the agent when the session (re)started."""
        self.agent_id = agent_id
        if so_far is not None:
            self._spent = Spent(so_far.day, so_far.day_usd, so_far.month_usd)

    @property
    def spent(self) -> Spent:
        """The known spend, seen from today."""
        return self._spent.at(day_of(self._clock()))

    def refusal(self, config: DynamicConfig) -> SpendCapReached | None:
        """Why the next call must not be made (a cap is reached), or None."""
        cap, spent = _CAPS.of(config, None), self.spent
        reached = cap_reached(cap, spent, self._granted)
        if reached is None:
            return None
        why = cap_refusal(self.agent_id, cap, spent, self._granted) or ""
        log.warning("spend cap reached; model call not made", fields={"why": why})
        return SpendCapReached(why, reached)

    def grant(self, period: Period, usd: float) -> None:
        """A human allowed `usd` more than the `period`'s cap (until the period ends)."""
        self._granted = self._granted.plus(day_of(self._clock()), period, usd)
        log.info("spend beyond the cap granted", fields={"period": period, "usd": usd})

    def observe(self, event: Mapping[str, Any]) -> None:
        """A committed event (JSON): a TTS call's known cost counts towards the caps too."""
        billed = tts_billed(event)
        if billed is not None and billed.cost.usd is not None:
            self._spent = self._spent.plus(day_of(self._clock()), billed.cost.usd)

    def record(
        self,
        completion: Completion,
        price: ModelPrice | None,
        *,
        job_id: str | None,
        purpose: Purpose,
    ) -> LlmCallRecorded:
        """The call's `llm_call` event, its cost added to the meter."""
        if job_id is not None:
            self._jobs[completion.lane] = job_id
        usage = completion.usage
        cost = call_cost(
            price,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=completion.cached_tokens,
            reported_usd=completion.provider_cost_usd,
        )
        self._spent = self._spent.plus(day_of(self._clock()), cost.usd)
        return LlmCallRecorded(
            lane=completion.lane,
            job_id=job_id or self._jobs.get(completion.lane),
            purpose=purpose,
            model=completion.model,
            provider_model=completion.provider_model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=min(completion.cached_tokens, usage.prompt_tokens),
            latency_ms=completion.latency_ms,
            cost_usd=cost.usd,
            cost_source=cost.source,
        )


FREE: Final = ModelPrice(prompt=0, completion=0)
"""The price of the built-in demo model (`scripted`, no endpoint): it runs inside choir-agent,
no provider bills it."""


def price_of(config: DynamicConfig, model: str) -> ModelPrice | None:
    """`models.<model>.price` of the config snapshot, None when absent or unreadable; the
    built-in demo model without one is free (its usage reads as $0, not as unknown)."""
    return _PRICES.of(config, model)


def _price(config: DynamicConfig, model: str | None) -> ModelPrice | None:
    entry = (config.data.get("models") or {}).get(model)
    if not isinstance(entry, Mapping):
        return None
    price = _valid(ModelPrice, entry.get("price"))
    demo = entry.get("provider") == "scripted" and entry.get("endpoint") is None
    return FREE if price is None and demo else price


def _cap(config: DynamicConfig, _: str | None) -> SpendCap | None:
    return _valid(SpendCap, config.data.get("spend_cap"))


_Read = TypeVar("_Read")


class _PerSnapshot(Generic[_Read]):
    """What a config snapshot says, validated once per snapshot and key (a model's name).

    Every model call asks for the cap and the price (~12 µs of validation together), and the
    answer changes only with the config: a reload swaps the snapshot whole (`DynamicState`), so
    the one last read answers for as long as it is the current one.
    """

    __slots__ = ("_config", "_read", "_read_of")

    def __init__(self, read: Callable[[DynamicConfig, str | None], _Read]) -> None:
        self._read_of = read
        self._config: DynamicConfig | None = None
        self._read: dict[str | None, _Read] = {}

    def of(self, config: DynamicConfig, key: str | None) -> _Read:
        if config is not self._config:
            self._config, self._read = config, {}
        try:
            return self._read[key]
        except KeyError:
            read = self._read[key] = self._read_of(config, key)
            return read


_PRICES: Final = _PerSnapshot(_price)
_CAPS: Final = _PerSnapshot(_cap)


_Config = TypeVar("_Config", ModelPrice, SpendCap)


def _valid(kind: type[_Config], raw: Any) -> _Config | None:
    """`raw` as `kind`; choird validated the config it publishes, so None only when absent."""
    if not isinstance(raw, Mapping):
        return None
    try:
        return kind.model_validate(_plain(raw))
    except ValidationError:
        return None


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    return value
