"""The LLM sections of config.json (§6.3, §21): `models.<name>` with its price, and `spend_cap`.

Apart from the other named resources (`resources`): choir-agent validates these from its live
config (the LLM client's settings, the spend meter), and importing `resources` made it build the
classes of some twenty sections it never reads — TTS, voice, email, Notion, search, gateways,
Postgres: ~8 ms of CPU between its INIT_HELLO and its first model call.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from choir.config.base import ConfigModel, HttpUrl, NonEmpty, Positive
from choir.config.names import SecretName

Usd = Annotated[float, Field(ge=0.0, le=1_000_000.0, allow_inf_nan=False)]
"""A price or an amount in US dollars: finite, never negative."""


class ModelPrice(ConfigModel):
    """What a model costs, in USD per million tokens (the unit providers publish prices in)."""

    prompt: Usd
    """Per million prompt tokens not served from the cache."""
    completion: Usd
    """Per million generated tokens."""
    cached: Usd | None = None
    """Per million prompt tokens served from the provider's cache; null: the `prompt` price."""


# Here, not in `model` beside the agent it caps: choir-agent reads it from its live config, and
# importing `model` loaded the whole config tree into it (~9 ms of its start).
class SpendCap(ConfigModel):
    """The most an agent may spend on LLM calls; at a cap its next call is not made."""

    day_usd: Annotated[Usd, Field(gt=0.0)] | None = None
    """Per UTC day; null: no daily cap."""
    month_usd: Annotated[Usd, Field(gt=0.0)] | None = None
    """Per UTC calendar month; null: no monthly cap."""


class ModelConfig(ConfigModel):
    """A named LLM: an OpenAI-compatible chat-completions model with tool calling (§21)."""

    provider: NonEmpty
    """Who serves it: `openrouter`, `openai`, any OpenAI-compatible name, or `scripted` (the
    built-in demo provider that replays a script; not a real LLM)."""
    model: NonEmpty
    """The provider's model name, passed as-is (e.g. `anthropic/claude-sonnet-4-20250514`)."""
    endpoint: HttpUrl | None = None
    """Base URL of the chat-completions API; required unless the provider is `scripted`."""
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = 0.7
    """Sampling temperature; null for reasoning models that reject it (o1, o3)."""
    reasoning_effort: NonEmpty | None = None
    """Reasoning effort (`low`, `medium`, `high`) for models that support it; passed as-is."""
    secret: SecretName | None = None
    """Secret holding the API key; null for endpoints that need none."""
    context_window_tokens: Positive = 128_000
    """Context window of the model; compaction triggers at 80% of it (§11.3)."""
    label: str | None = None
    """What to show instead of the model name (the demo model says it is not a real LLM)."""
    timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 120.0
    """Longest wait for one answer, from sending the request to its last byte; past it the user
    is told the model did not answer (and can try again). Hot-reloaded: the next call uses it."""
    connect_timeout_s: Annotated[float, Field(gt=0.0, le=600.0)] = 10.0
    """Longest wait for the connection to the endpoint; past it the endpoint is unreachable
    (never longer than `timeout_s`)."""
    price: ModelPrice | None = None
    """Per-million-token prices, for usage cost; null: a call's cost is unknown unless the
    provider reports it (OpenRouter does), and is never shown as 0."""
