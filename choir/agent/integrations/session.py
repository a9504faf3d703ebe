"""The integration tools of one session: which can run under the current config, and running them.

A tool whose service is not configured for the session (no provider, no secret) is *withheld*:
left out of every tool list the model is shown (`LaneKit.tools`), refused with `tool_unavailable`
and the reason if called anyway (a model may still name it, or it became unavailable
mid-session: the arbiter gate), and reported with its reason in the agent's status. What is
withheld follows the config and secrets snapshots, which a reload swaps whole: the answer is
kept per pair.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from choir.agent.kernel.dispatch import LaneHook
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.kernel.registry import RegisteredTool, ToolRegistry
from choir.agent.kernel.workspace import Workspace
from choir.agent.replication.live_config import DynamicConfig, DynamicState, Secrets
from choir.core.integrations import (
    AGENT_REPO,
    AGENT_REPO_ENV,
    EMAIL_TOOLS,
    NOTION_QUERY,
    TTS_SPEAK,
    WEB_SEARCH,
    email_access,
    notion_access,
    search_provider,
    voice_access,
    withheld_tools,
)
from choir.protocol.tooling.tools import ToolResult

if TYPE_CHECKING:  # loaded on a thread once the agent serves (`choir.agent.app`), not at start
    import aiohttp

UNAVAILABLE: Final = "tool_unavailable"
DEFAULT_TIMEOUT_S: Final = 15.0


class Integrations:
    """One session's integration tools: `withheld`, the arbiter `gate`, the lane `hooks`."""

    def __init__(self, state: DynamicState, registry: ToolRegistry, workspace: Workspace) -> None:
        self._state = state
        self._registry = registry
        self._workspace = workspace
        self._session: aiohttp.ClientSession | None = None
        """The aiohttp session of the integrations' calls, opened at the first call."""
        self._withheld: tuple[DynamicConfig, Secrets, Mapping[str, str]] | None = None

    def withheld(self) -> Mapping[str, str]:
        """The integration tools that cannot run now, with why (read-only)."""
        config, secrets, cached = self._state.current(), self._state.secrets(), self._withheld
        if cached is not None and cached[0] is config and cached[1] is secrets:
            return cached[2]
        data = {**config.data, AGENT_REPO: os.environ.get(AGENT_REPO_ENV)}  # set by the runtime
        answer = MappingProxyType(withheld_tools(data, secrets.names()))
        self._withheld = (config, secrets, answer)
        return answer

    def gate(
        self, lane: str, tool: RegisteredTool, arguments: Mapping[str, Any]
    ) -> ToolResult | None:
        """Refuse a call of a withheld tool, saying why (the arbiter's admission)."""
        reason = self.withheld().get(tool.name)
        if reason is None:
            return None
        return ToolResult.fail(UNAVAILABLE, f"{tool.name} is not available: {reason}")

    def hooks(self) -> dict[str, LaneHook]:
        """The implementations, by tool name, for the dispatcher."""
        return {
            WEB_SEARCH: self._web_search,
            NOTION_QUERY: self._notion,
            TTS_SPEAK: self._speak,
            **dict.fromkeys(EMAIL_TOOLS, self._mail),
        }

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _web_search(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        from choir.agent.integrations import web_search  # as the others: at the first call

        reason = self.withheld().get(WEB_SEARCH)  # a reload since the call was admitted
        provider = search_provider(self._state.current().data.get("search"))
        if reason is not None or provider is None:
            return ToolResult.fail(UNAVAILABLE, f"{proposal.tool} is not available: {reason}")
        secrets = self._state.secrets()
        call = web_search.SearchInput.model_validate(arguments)
        deadline = time.monotonic() + self._timeout_s(proposal.tool) - 0.5
        return await web_search.search(
            await self._http(), provider, secrets.reveal(provider.secret), call, deadline=deadline
        )

    async def _notion(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        from choir.agent.integrations import notion  # its client loads at the first call

        reason = self.withheld().get(NOTION_QUERY)
        access = notion_access(self._state.current().data.get("bound"))
        if reason is not None or access is None:
            return ToolResult.fail(UNAVAILABLE, f"{proposal.tool} is not available: {reason}")
        token = self._state.secrets().reveal(access.secret)
        call = notion.NotionInput.model_validate(arguments)
        return await notion.query(access, token, call, self._timeout_s(proposal.tool) - 0.5)

    async def _speak(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        from choir.agent.integrations import tts

        reason = self.withheld().get(TTS_SPEAK)
        voice = voice_access(self._state.current().data)  # resolved now: hot reload (§21.3)
        if reason is not None or isinstance(voice, str):
            return ToolResult.fail(UNAVAILABLE, f"{proposal.tool} is not available: {reason}")
        key = self._state.secrets().reveal(voice.secret)
        call = tts.SpeakInput.model_validate(arguments)
        timeout_s = self._timeout_s(proposal.tool) - 0.5
        price = tts.price_per_million(self._state.current().data, voice)
        return await tts.speak(voice, key, call, self._workspace, timeout_s, price)

    async def _mail(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        from choir.agent.integrations import mail

        name = proposal.tool
        reason = self.withheld().get(name)
        access = email_access(self._state.current().data.get("bound"))
        if reason is not None or access is None:
            return ToolResult.fail(UNAVAILABLE, f"{name} is not available: {reason}")
        secret = self._state.secrets().reveal(access.secret)
        timeout_s = self._timeout_s(name) - 0.5
        if name == mail.SEND:
            sending = mail.SendInput.model_validate(arguments)
            return await mail.send(access, secret, sending, self._workspace, timeout_s)
        if name == mail.RECEIVE:
            reading = mail.ReceiveInput.model_validate(arguments)
            return await mail.receive(access, secret, reading, self._workspace, timeout_s)
        checking = mail.CheckInput.model_validate(arguments)
        return await mail.check(access, secret, checking, timeout_s)

    def _timeout_s(self, name: str) -> float:
        tool = self._registry.get(name)
        return tool.manifest.runtime.timeout_ms / 1000 if tool else DEFAULT_TIMEOUT_S

    async def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            # aiohttp loads at the first integration call that needs it (~0.13 s of CPU: two TLS
            # contexts from the system's CA store), on a thread: the loop keeps beating
            module = await asyncio.to_thread(importlib.import_module, "aiohttp")
            if self._session is None:  # another call may have made it meanwhile
                self._session = module.ClientSession()
        return self._session
