"""The scripted model provider: an OpenAI-compatible HTTP server replaying scripts.

    async with ScriptedModelServer({"edge-model": edge, "core-model": core}) as server:
        settings = ModelSettings(name="demo", model="edge-model", endpoint=server.url)
        ...
        assert "temperature" not in server.requests[0].body

It speaks the real protocol on a real socket, so the LLM client under test is the one in
production (STYLE.md: fake only at the transport seam). Several scripts run side by side, chosen
by the `X-Choir-Script` header, else by the request's `model`, else the `*` script (a single
`Script` passed alone is that one). Every request is recorded, refused ones included, for tests
to assert on. `zero_latency` ignores scripted delays, for benchmarks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Self

import orjson
from aiohttp import web

from choir.scripted.answers import Answer, answer, error_answer
from choir.scripted.player import ScriptPlayer, last_turn
from choir.scripted.request import request_problems
from choir.scripted.script import Script

SCRIPT_HEADER: Final = "X-Choir-Script"
"""Request header naming the script to answer from, overriding the `model` field."""
ANY_MODEL: Final = "*"
"""Key of the script that answers models no other script is keyed by."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received, and how it answered."""

    path: str
    """The request path, e.g. `/v1/chat/completions`."""
    headers: dict[str, str]
    """Request headers as received (including Authorization: this is a test double)."""
    body: Any
    """The decoded JSON body; None when it was not JSON."""
    script: str | None
    """Key of the script that answered; None when the request was refused before that."""
    status: int
    """Status of the answer."""
    problem: str | None
    """Why the request was refused with 400; None otherwise."""


class ScriptedModelServer:
    """Serves chat completions from scripts on `host:port` (port 0 picks a free one)."""

    def __init__(
        self,
        scripts: Script | Mapping[str, Script],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        zero_latency: bool = False,
    ) -> None:
        scripts = {ANY_MODEL: scripts} if isinstance(scripts, Script) else dict(scripts)
        self.players = {key: ScriptPlayer(script) for key, script in scripts.items()}
        """One replay state per script key."""
        self.host = host
        self.port = port
        """Listening port; the chosen one after start."""
        self.zero_latency = zero_latency
        """Answer at once, ignoring every step's `delay_ms`."""
        self.requests: list[RecordedRequest] = []
        """Every request received, in arrival order."""
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The endpoint to configure (`…/v1`, like `https://openrouter.ai/api/v1`)."""
        return f"http://{self.host}:{self.port}/v1"

    def requests_for(self, script: str) -> list[RecordedRequest]:
        """The requests answered from `script`."""
        return [request for request in self.requests if request.script == script]

    def remaining(self, script: str = ANY_MODEL) -> int:
        """Steps of `script` not used up yet."""
        return self.players[script].remaining

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        app.router.add_post("/chat/completions", self._complete)
        runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _complete(self, http_request: web.Request) -> web.Response:
        raw = await http_request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        key = self._script_key(http_request, body)
        result, problem = self._answer(key, body, len(raw))
        self.requests.append(
            RecordedRequest(
                path=http_request.path,
                headers=dict(http_request.headers),
                body=body,
                script=key if key in self.players else None,
                status=result.status,
                problem=problem,
            )
        )
        if result.delay_ms and not self.zero_latency:
            await asyncio.sleep(result.delay_ms / 1000)
        headers = {**result.headers, "Content-Type": result.content_type}
        return web.Response(status=result.status, body=result.body, headers=headers)

    def _script_key(self, http_request: web.Request, body: Any) -> str | None:
        if SCRIPT_HEADER in http_request.headers:
            return http_request.headers[SCRIPT_HEADER]
        model = body.get("model") if isinstance(body, dict) else None
        if isinstance(model, str) and model in self.players:
            return model
        return ANY_MODEL if ANY_MODEL in self.players else model if isinstance(model, str) else None

    def _answer(self, key: str | None, body: Any, size: int) -> tuple[Answer, str | None]:
        """The answer, and the problem when the request is refused."""
        if body is None:
            return _refuse("the request body is not valid JSON")
        problems = request_problems(body)
        if problems:
            return _refuse("invalid chat-completions request: " + "; ".join(problems))
        player = self.players.get(key or "")
        if player is None:
            known = ", ".join(sorted(self.players))
            return _refuse(f"no script for model {key!r} (scripts: {known})")
        step = player.next_step(body["messages"])
        if step is None:
            return _refuse(_exhausted(key or "", body["messages"]))
        return answer(step, player, body["model"], size), None


def _refuse(problem: str) -> tuple[Answer, str]:
    return error_answer(400, problem), problem


def _exhausted(key: str, messages: list[Any]) -> str:
    turn = last_turn(messages)
    said = f"last {turn.role} message {turn.text[:80]!r}" if turn else "no user or tool message"
    return (
        f"script {key!r} is exhausted: no step left that matches this request ({said}); "
        "add a step or mark one repeat"
    )
