"""What the edge lane and the core jobs share: the model call, the tool list, memory, status.

`LaneKit` is the lanes' one view of the session: it takes the model settings from the *current*
config snapshot at each call (§21.2: a reload changes the next call, never one in flight), keeps
every lane's working memory in step with the log, commits a model's answer with session-unique
call ids (the same ids the arbiter sees, so prompts pair every call with its result), answers
the calls the model got wrong with a structured error, and reports lane states to choird.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from choir.adapters.llm.client import (
    Completion,
    CompletionRequest,
    InvalidToolCall,
    LlmClient,
    ModelSettings,
    RateLimitNotice,
)
from choir.agent.kernel.commitlog import LogEntry
from choir.agent.kernel.registry import lane_kind_of
from choir.agent.lanes.budget_follow import BudgetFollower
from choir.agent.lanes.compaction import CompactionDriver
from choir.agent.lanes.memories import Memories
from choir.agent.lanes.spend import Purpose, SpendMeter, price_of
from choir.agent.replication.live_config import DynamicConfig, DynamicState, Secrets
from choir.agent.replication.status import StatusReporter
from choir.agent.stopping import Drain
from choir.agent.wiring import Kernel
from choir.config.llm import ModelConfig
from choir.core import budgets
from choir.core.prompt.build import DEFAULT_WINDOW_SIZE
from choir.core.skills.runner import SkillView, control_tool_views, prompt_view
from choir.errors import ConfigError
from choir.logs import get_logger, replace_secrets
from choir.protocol import (
    LaneStatus,
    ModelOutput,
    ReportStatusRequest,
    ToolCall,
    ToolResult,
    ToolResultCommitted,
    to_wire_name,
)
from choir.protocol.names import from_wire_name

if TYPE_CHECKING:  # the demo server (aiohttp) loads only when a session uses it: faster starts
    from choir.scripted import ScriptedModelServer

log = get_logger("choir.agent.lanes")

SCRIPTED: Final = "scripted"
"""The built-in demo provider: with no endpoint it is served in-process from the demo script."""


@dataclass(frozen=True, slots=True)
class Identity:
    """The identity files at the root of `/choir` (§11.3); a missing one is empty."""

    user_md: str = ""
    soul_md: str = ""
    soul_core_md: str = ""

    @classmethod
    def read(cls, root: Path) -> Identity:
        def text(name: str) -> str:
            path = root / name
            return path.read_text(encoding="utf-8") if path.is_file() else ""

        return cls(text("USER.md"), text("SOUL.md"), text("SOUL-CORE.md"))


class DemoModel:
    """The demo model's server, started on first use (only sessions bound to it need it)."""

    def __init__(self) -> None:
        self._server: ScriptedModelServer | None = None
        self._starting = asyncio.Lock()

    async def url(self) -> str:
        async with self._starting:
            if self._server is None:
                from choir.scripted import ScriptedModelServer, demo_script

                server = ScriptedModelServer(demo_script())
                await server.start()
                self._server = server
            return self._server.url

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.close()


async def model_settings(state: DynamicState, demo: DemoModel) -> ModelSettings:
    """The bound model's settings in the current config snapshot, its key included."""
    config = state.current()
    bindings = config.bindings
    name = bindings.llm if bindings is not None else None
    models = config.data.get("models") or {}
    if not name or name not in models:
        raise ConfigError(
            [f"this session is bound to no known model ({name!r})"],
            header="cannot call the model: bind one with choirctl agent set",
        )
    model = ModelConfig.model_validate(plain(models[name]))
    endpoint = None
    if model.provider == SCRIPTED and model.endpoint is None:
        endpoint = await demo.url()
    key = state.secrets().reveal(model.secret) if model.secret else None
    return ModelSettings.from_config(name, model, api_key=key, endpoint=endpoint)


def plain(value: Any) -> Any:
    """A deep-frozen config value (read-only mappings, tuples) as plain JSON data."""
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [plain(item) for item in value]
    return value


def bound_secrets(state: DynamicState) -> dict[str, dict[str, str]]:
    """The kernel's `SecretsView`: the secrets of each bound resource kind, by name."""
    secrets = state.secrets()
    bound = state.current().data.get("bound") or {}
    view: dict[str, dict[str, str]] = {}
    for kind, entry in bound.items():
        name = entry.get("secret") if isinstance(entry, Mapping) else None
        if isinstance(name, str) and name in secrets.names():
            view[str(kind)] = {name: secrets.reveal(name)}
    return view


def redact_secrets(secrets: Secrets) -> None:
    """Make the session's current secret values the log redaction set.

    `replace_secrets`, not `register_secrets`: a rotated-out value is no longer a secret, and the
    redaction set stays the values the session really holds.
    """
    replace_secrets(secrets.reveal(name) for name in secrets.names())


@cache
def _control_tools() -> tuple[tuple[str, dict[str, Any]], ...]:
    """The skill control tools as `tools` entries (name, entry), built once and shared by every
    list offered, like the registry's own: an entry that is the same dict at every call is
    measured once (`LanePrompt.size`), where a fresh one was encoded again at every step."""
    return tuple(
        (
            control.name,
            {
                "type": "function",
                "function": {
                    "name": to_wire_name(control.name),
                    "description": control.description,
                    "parameters": control.parameters,
                },
            },
        )
        for control in control_tool_views()
    )


@dataclass(slots=True)
class LaneKit:
    """The shared machinery of one session's lanes."""

    kernel: Kernel
    llm: LlmClient
    state: DynamicState
    demo: DemoModel
    identity: Identity
    status: StatusReporter
    memories: Memories = field(default_factory=Memories)
    drain: Drain = field(default_factory=Drain)
    """Graceful stop (§17.2): once set, lanes finish their safe point and start nothing new."""
    withheld: Callable[[], Mapping[str, str]] = dict
    """The tools that cannot run under the current config, with why: never offered."""
    session_id: str = ""
    """The session's id: names the compaction archives (`choir.core.memory.summaries.archives`)."""
    spend: SpendMeter = field(default_factory=SpendMeter)
    """Each call's cost, committed as an `llm_call` event; the spend caps, checked before it."""
    compaction: CompactionDriver = field(init=False)
    """Folds each lane's oldest events into its summary, in the background (§11.3)."""
    budgets: BudgetFollower = field(init=False)
    """Hot-reloaded budgets into the arbiter, fresh budget figures into the status reports."""
    _unsubscribe: Callable[[], None] | None = None
    _settings: tuple[DynamicConfig, Secrets, ModelSettings] | None = None
    """The model settings of the config and secrets snapshots they were read from: both are
    swapped whole on a reload, so the same pair gives the same settings at every call."""

    def __post_init__(self) -> None:
        self.compaction = CompactionDriver(
            self.kernel,
            self.state,
            self.memories,
            self._compaction_call,
            session_id=self.session_id,
        )
        kernel = self.kernel
        self.budgets = BudgetFollower(self.state, kernel.log, kernel.arbiter, self.status.refresh)

    def start(self) -> None:
        log, memories, spend = self.kernel.log, self.memories, self.spend

        def observe(entry: LogEntry) -> None:
            memories.observe(entry, log.fresh_model(entry))
            spend.observe(entry.event)  # a TTS call's cost (LLM calls are recorded directly)

        self._unsubscribe = log.subscribe(observe)
        self.status.watch_locks(self.kernel.locks)
        self.budgets.start()
        self.budgets.config_swapped(self.state.current())  # a version swapped in before start

    def stop(self) -> None:
        self.budgets.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    @property
    def window_size(self) -> int:
        size = self.state.current().data.get("event_window_size")
        return size if isinstance(size, int) else DEFAULT_WINDOW_SIZE

    def skills(self) -> list[tuple[str, str]]:
        return [(name, spec.description) for name, spec in self.kernel.skills.items()]

    def skill_view(self, lane: str) -> SkillView | None:
        return prompt_view(self.kernel.arbiter.policy.skill_runs.get(lane), self.kernel.skills)

    def tools(self, lane: str, only: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The `tools` parameter of `lane`: its tools, or a skill state's only while one runs."""
        view = self.skill_view(lane)
        allowed = list(view.allowed_tools) if view is not None else (list(only) if only else None)
        withheld = frozenset(self.withheld())
        offered = self.kernel.registry.llm_tools(lane_kind_of(lane), allowed, withheld)
        if self.kernel.skills:
            offered += [
                entry for name, entry in _control_tools() if allowed is None or name in allowed
            ]
        return offered

    async def complete(
        self,
        lane: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_rate_limited: RateLimitNotice | None = None,
        *,
        job_id: str | None = None,
        purpose: Purpose = "step",
    ) -> Completion:
        """One LLM call with the current config's model, committed as an `llm_call` event once
        it answers; LlmError, ConfigError, or SpendCapReached (the call is not made)."""
        config = self.state.current()
        refused = self.spend.refusal(config)
        if refused is not None:
            raise refused
        settings = await self._model_settings()
        retry_ms = config.data.get("rate_limit_retry_ms")
        request = CompletionRequest(
            settings,
            messages,
            lane=lane,
            tools=tools,
            **({"rate_limit_retry_ms": retry_ms} if isinstance(retry_ms, int) else {}),
        )
        completion = await self.llm.complete(request, on_rate_limited=on_rate_limited)
        price = price_of(config, completion.model)
        call = self.spend.record(completion, price, job_id=job_id, purpose=purpose)
        self.kernel.arbiter.commit(lane, call)
        return completion

    async def _compaction_call(
        self, lane: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Completion:
        return await self.complete(lane, messages, tools, purpose="compaction")

    async def _model_settings(self) -> ModelSettings:
        config, secrets, cached = self.state.current(), self.state.secrets(), self._settings
        if cached is not None and cached[0] is config and cached[1] is secrets:
            return cached[2]
        settings = await model_settings(self.state, self.demo)
        if not self._demo_bound(config):
            self._settings = (config, secrets, settings)
        return settings

    @staticmethod
    def _demo_bound(config: DynamicConfig) -> bool:
        """Whether the bound model is the in-process demo server, whose address is asked anew
        at each call (`model_settings`)."""
        bindings = config.bindings
        model = (config.data.get("models") or {}).get(bindings.llm if bindings else "")
        if not isinstance(model, Mapping):
            return False
        return model.get("provider") == SCRIPTED and model.get("endpoint") is None

    def record(self, lane: str, completion: Completion) -> list[ToolCall]:
        """Commit the model's answer; returns the calls to propose, with their session ids.

        Ids are `<lane>-<rev>-<n>` (rev of the ModelOutput): unique in the session, even after a
        resume. Calls the model got wrong are committed too, each answered at once with its
        structured error, so the model sees what to correct.
        """
        arbiter = self.kernel.arbiter
        prefix = f"{lane}-{self.kernel.log.head_rev + 1}"
        valid = [
            call.model_copy(update={"id": f"{prefix}-{index}"})
            for index, call in enumerate(completion.tool_calls)
        ]
        wrong = [
            (f"{prefix}-{len(valid) + index}", bad)
            for index, bad in enumerate(completion.invalid_tool_calls)
        ]
        shown = [ToolCall(id=i, name=from_wire_name(bad.wire_name)) for i, bad in wrong]
        output = ModelOutput(
            lane=lane,
            text=completion.text,
            tool_calls=[*valid, *shown],
            usage=completion.usage,
            model=completion.model,
            latency_ms=completion.latency_ms,
        )
        arbiter.commit(lane, output)
        for (call_id, bad), call in zip(wrong, shown, strict=True):
            result = self._unavailable(call.name, bad) or bad.result()
            arbiter.commit(
                lane, ToolResultCommitted(call_id=call_id, tool=call.name, result=result)
            )
        return valid

    def _unavailable(self, name: str, bad: InvalidToolCall) -> ToolResult | None:
        """For a call of a tool withheld now (it was offered earlier in the session, or the
        model guessed it), why it cannot run rather than `unknown_tool`."""
        reason = self.withheld().get(name) if bad.error_code == "unknown_tool" else None
        if reason is None:
            return None
        return ToolResult.fail("tool_unavailable", f"{name} is not available: {reason}")

    def report(self, lane: str, state: LaneStatus) -> None:
        arbiter = self.kernel.arbiter
        run = arbiter.policy.skill_runs.get(lane)
        left = budgets.remaining(
            arbiter.policy.budgets, arbiter.policy.limits, lane, time.monotonic()
        )
        self.status.report(
            ReportStatusRequest(
                lane=lane,
                state=state,
                skill=run.skill if run is not None and run.active else None,
                step=run.steps_taken if run is not None and run.active else None,
                budget_remaining=left,
            )
        )
