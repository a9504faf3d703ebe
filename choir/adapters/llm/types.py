"""What goes into an LLM call and what comes out of it.

`ModelSettings` is a snapshot: the lane takes it from the current config when a call starts, so a
hot reload (§21.2) changes the next call, never one in flight. The API key lives only here and in
the `Authorization` header; it is left out of every repr.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from choir.config.llm import ModelConfig
from choir.errors import ConfigError
from choir.protocol.log.events import ModelOutput, ToolCall, Usage
from choir.protocol.tooling.tools import ToolResult

DEFAULT_RATE_LIMIT_RETRY_MS = 1_000
"""`rate_limit_retry_ms` of config.json when the key is absent (§7.7)."""
DEFAULT_TIMEOUT_S = 120.0
"""`models.<name>.timeout_s` when absent: a hung model costs the user two minutes, not five."""
DEFAULT_CONNECT_TIMEOUT_S = 10.0
"""`models.<name>.connect_timeout_s` when absent."""


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """The model settings of one call, fixed at call start."""

    name: str
    """The named model of config.json (e.g. `sonnet`); what telemetry and events report."""
    model: str
    """The provider's model id, sent as `model`."""
    endpoint: str
    """Base URL of the chat-completions API, e.g. `https://openrouter.ai/api/v1`."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as `Authorization: Bearer <key>` when set; never logged, repr'd or put in an error."""
    temperature: float | None = None
    """Omitted from the request when null (reasoning models reject it)."""
    reasoning_effort: str | None = None
    """Passed as-is; omitted when null."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Deadline of one attempt, from sending the request to the last byte of the answer
    (`models.<name>.timeout_s`)."""
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    """Deadline of opening the connection (`models.<name>.connect_timeout_s`)."""

    @classmethod
    def from_config(
        cls,
        name: str,
        config: ModelConfig,
        *,
        api_key: str | None = None,
        endpoint: str | None = None,
    ) -> ModelSettings:
        """Settings of the named model `name`; `endpoint` overrides the configured one (the
        scripted provider has none until its server is listening)."""
        base = endpoint or config.endpoint
        if base is None:
            raise ConfigError(
                [f"models.{name}.endpoint: required for provider {config.provider!r}"],
                header="cannot call the model",
            )
        return cls(
            name=name,
            model=config.model,
            endpoint=base,
            api_key=api_key,
            temperature=config.temperature,
            reasoning_effort=config.reasoning_effort,
            timeout_s=config.timeout_s,
            connect_timeout_s=config.connect_timeout_s,
        )


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """One chat-completions call of one lane."""

    settings: ModelSettings
    """Snapshot of the model settings taken when the call started."""
    messages: Sequence[Mapping[str, Any]]
    """The conversation in OpenAI chat format, system prompt first."""
    lane: str
    """`edge` or `core:<job-name>`: whose call this is (telemetry, §22.1)."""
    tools: Sequence[Mapping[str, Any]] = ()
    """OpenAI `tools` entries (`ToolManifest.llm_view()`); none omits `tools` from the body."""
    max_tokens: int | None = None
    """Cap on generated tokens; omitted when null."""
    rate_limit_retry_ms: int = DEFAULT_RATE_LIMIT_RETRY_MS
    """Wait before the one retry of a 429 that carries no Retry-After."""
    timeout_s: float | None = None
    """Overall deadline of one attempt; null uses the model's (`ModelSettings.timeout_s`)."""


@dataclass(frozen=True, slots=True)
class InvalidToolCall:
    """A tool call the model sent that cannot be run: it is answered, never dropped."""

    id: str
    """The call id; the answering tool message must carry it."""
    wire_name: str
    """The function name exactly as the model sent it."""
    arguments: str
    """The arguments exactly as the model sent them."""
    error_code: str
    """`unknown_tool` or `invalid_arguments`."""
    problem: str
    """One line telling the model what was wrong and how to call it correctly."""
    offered_tools: list[str] = field(default_factory=list)
    """Canonical names of the tools the call offered, for `unknown_tool`."""

    def result(self) -> ToolResult:
        """The structured error to send back to the model as this call's tool result."""
        if self.error_code == "unknown_tool":
            return ToolResult.fail(self.error_code, self.problem, known_tools=self.offered_tools)
        return ToolResult.fail(self.error_code, self.problem)


@dataclass(frozen=True, slots=True)
class Completion:
    """A successful LLM call: what the model said, and its cost."""

    text: str
    """Assistant text; empty when the model only called tools."""
    tool_calls: list[ToolCall]
    """Runnable structured tool calls, canonical names, parsed arguments, in the model's order."""
    invalid_tool_calls: list[InvalidToolCall]
    """Calls with an unknown name or unparsable arguments; answer each with `.result()`."""
    usage: Usage
    """Token counts the provider reported (zeros when it reported none)."""
    latency_ms: int
    """Wall time of the whole call, including a rate-limit wait and retry."""
    model: str
    """The named model of config.json that was called."""
    provider_model: str
    """The model id the provider says answered (OpenRouter may route to a specific version)."""
    lane: str
    """The lane that made the call."""
    finish_reason: str | None
    """`stop`, `tool_calls`, `length`… as the provider reported it."""
    message: dict[str, Any]
    """The assistant message to append to the conversation: every tool call, valid or not, in
    wire form, so each can be answered with a tool message."""
    retried: bool = False
    """True when the call was rate limited once and retried."""
    cached_tokens: int = 0
    """Of the prompt tokens, those served from the provider's prompt cache."""
    provider_cost_usd: float | None = None
    """The cost the provider reported (OpenRouter's `usage.cost`); None when it reported none."""

    def model_output(self) -> ModelOutput:
        """The `ModelOutput` event of this call; invalid tool calls are answered, not proposed,
        so they are not part of it."""
        return ModelOutput(
            lane=self.lane,
            text=self.text,
            tool_calls=self.tool_calls,
            usage=self.usage,
            model=self.model,
            latency_ms=self.latency_ms,
        )
