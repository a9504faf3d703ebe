"""Scripts of the scripted model provider: chat-completion answers to replay, as data.

A script is an ordered list of steps. Each request is answered by the first step not used yet
whose conditions (`match`, `match_regex`, `after`) hold for the request's last user or tool
message; a step is then used up unless it is marked `repeat`. Steps without conditions therefore
play in order, and steps with conditions let one script branch on what it is asked.

    Script(steps=[
        ToolCallsStep(calls=[ScriptedCall(name="choir.fs.read", arguments={"path": "a.txt"})]),
        ReplyStep(text="a.txt says hello", after="tool"),
    ])

Scripts are also JSON files (`load_script`); the models reject unknown keys so a typo fails
loudly instead of silently changing what a test exercises.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from choir.config.validation.problems import json_path
from choir.errors import ConfigError
from choir.protocol.names import ToolName


class ScriptModel(BaseModel):
    """Frozen, `extra="forbid"`; attribute docstrings become JSON Schema descriptions."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class _Step(ScriptModel):
    match: str | None = None
    """Text the last user or tool message must contain (case-insensitive)."""
    match_regex: str | None = None
    """Regular expression the last user or tool message must contain (`re.search`)."""
    after: Literal["user", "tool"] | None = None
    """Role the last user or tool message must have: `tool` answers a tool result."""
    delay_ms: int = Field(default=0, ge=0)
    """Wait before answering (ignored in zero-latency mode)."""
    repeat: bool = False
    """Never used up: the step answers every request it matches."""
    templated: bool = False
    """Fill `{1}`, `{2}`… in the text and in string call arguments with `match_regex`'s groups
    (from a tool message, JSON string escapes undone), so an answer can echo what was asked."""

    @field_validator("match_regex")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
        return pattern

    @model_validator(mode="after")
    def _template_needs_groups(self) -> Self:
        if self.templated and (self.match_regex is None or not re.compile(self.match_regex).groups):
            raise ValueError("templated needs a match_regex with at least one group")
        return self


class ScriptedUsage(ScriptModel):
    """Token counts a step reports, and what a provider may add to them (the protocol's `Usage`
    is accepted too: its fields are these)."""

    model_config = ConfigDict(frozen=True, extra="forbid", from_attributes=True)

    prompt_tokens: int = Field(default=0, ge=0)
    """Tokens sent."""
    completion_tokens: int = Field(default=0, ge=0)
    """Tokens generated."""
    total_tokens: int = Field(default=0, ge=0)
    """Both, as billed."""
    cached_tokens: int = Field(default=0, ge=0)
    """Prompt tokens served from the cache, sent as `prompt_tokens_details.cached_tokens`."""
    cost: float | None = Field(default=None, ge=0)
    """The call's cost in USD, sent as `usage.cost` (as OpenRouter does); None: not sent."""


class ReplyStep(_Step):
    """Answer with assistant text."""

    kind: Literal["reply"] = "reply"
    text: str
    """The assistant's text."""
    finish_reason: str = "stop"
    """Reported finish reason; `content_filter` or `length` simulate those outcomes."""
    usage: ScriptedUsage | None = None
    """Token counts to report; estimated from the text when absent."""


class ScriptedCall(ScriptModel):
    """One tool call; the server sends its wire name."""

    name: ToolName
    """Canonical tool name, e.g. `choir.fs.read`."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The call's arguments."""
    raw_arguments: str | None = None
    """Send this text as the arguments instead (e.g. invalid JSON, to test error handling)."""
    id: str | None = None
    """The call id; `call_<n>` numbered per script when absent."""
    raw_name: str | None = None
    """Send this function name instead of the wire name (e.g. one no tool has, in tests)."""


class ToolCallsStep(_Step):
    """Answer with structured tool calls (and optional text)."""

    kind: Literal["tool_calls"] = "tool_calls"
    calls: list[ScriptedCall] = Field(min_length=1)
    """The calls, in order."""
    text: str = ""
    """Assistant text sent alongside the calls."""
    usage: ScriptedUsage | None = None
    """Token counts to report; estimated when absent."""


class HttpErrorStep(_Step):
    """Answer with an HTTP error status."""

    kind: Literal["http_error"] = "http_error"
    status: int = Field(ge=400, le=599)
    """The status code."""
    message: str = "scripted error"
    """The OpenAI-style `error.message` of the body."""
    body: Any = None
    """A JSON body to send instead of the OpenAI-style error object."""


class RateLimitStep(_Step):
    """Answer 429 Too Many Requests."""

    kind: Literal["rate_limited"] = "rate_limited"
    retry_after: str | None = None
    """`Retry-After` header value (delay-seconds or an HTTP-date); none sends no header."""


class RawStep(_Step):
    """Answer with any body, to exercise a client's handling of malformed responses."""

    kind: Literal["raw"] = "raw"
    status: int = Field(default=200, ge=100, le=599)
    """The status code."""
    body: str
    """The body text, sent as-is (UTF-8); `\udc80`…`\udcff` are sent as the single bytes 0x80…0xFF
    they stand for (Python's surrogateescape), to send a body that is not valid UTF-8."""
    content_type: str = "application/json"
    """The Content-Type header."""


Step = Annotated[
    ReplyStep | ToolCallsStep | HttpErrorStep | RateLimitStep | RawStep,
    Field(discriminator="kind"),
]
"""One scripted answer."""


class Script(ScriptModel):
    """The answers one model replays."""

    description: str = ""
    """What the script is for."""
    steps: list[Step] = Field(min_length=1)
    """The answers; see the module docstring for how a step is chosen."""

    @model_validator(mode="after")
    def _ids_unique(self) -> Self:
        ids = [
            call.id for step in self.steps if isinstance(step, ToolCallsStep) for call in step.calls
        ]
        given = [call_id for call_id in ids if call_id is not None]
        if len(set(given)) != len(given):
            raise ValueError("tool call ids must be unique within a script")
        return self


def load_script(path: Path) -> Script:
    """The script in JSON file `path`; ConfigError listing every problem otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read ({exc.strerror})"]) from None
    try:
        return Script.model_validate_json(text)
    except ValidationError as exc:
        problems = [
            f"{json_path(_without_tags(error['loc']), root='script')}: {error['msg']}"
            for error in exc.errors(include_url=False)
        ]
        raise ConfigError(problems, header=f"{path}: invalid script") from None


_KINDS: Final = frozenset(("reply", "tool_calls", "http_error", "rate_limited", "raw"))


def _without_tags(loc: tuple[int | str, ...]) -> list[int | str]:
    """The error location without pydantic's union tag: `steps[0].reply.text` -> `steps[0].text`."""
    return [
        part
        for index, part in enumerate(loc)
        if not (part in _KINDS and index > 0 and isinstance(loc[index - 1], int))
    ]
