"""`choir.web.browse` (§8.7, §18.2), served by choird over EXECUTE_HOST_TOOL.

One call is one `action` in the caller's own browser context (`BrowserWorker.session`): open a
URL (and read its first chunk), read the page's text in chunks, list its links, find elements
by CSS selector or text and click or type into them, list, switch and close tabs, and take a
screenshot into the workspace's `.choirtmp/send/` (which the gateway delivers). A load or an
element action longer than `browser.page_timeout_ms` answers `timeout`; Chromium gone answers
`service_unavailable`. Arguments are checked again here (`BrowseCall`).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from choir.daemon.agents.host_tools import HostToolCall, HostTools
from choir.daemon.workers.browser import actions
from choir.daemon.workers.browser.actions import Refused
from choir.daemon.workers.browser.chromium import BrowserUnavailable, BrowserWorker, SessionBrowser
from choir.daemon.workers.browser.off import TOOL, UNAVAILABLE
from choir.daemon.workers.browser.rules import BrowseCall, web_url
from choir.protocol import ToolResult

if TYPE_CHECKING:
    from playwright.async_api import Page

WorkspaceOf = Callable[[HostToolCall], Path]
"""The calling session's workspace directory on the host."""


class BrowseTool:
    """The handler, over the worker and a way to find a session's workspace."""

    def __init__(self, worker: BrowserWorker, workspace_of: WorkspaceOf) -> None:
        self._worker = worker
        self._workspace_of = workspace_of

    def register(self, host_tools: HostTools) -> Callable[[], None]:
        return host_tools.register(TOOL, self.browse, available=self._worker.unavailable)

    async def browse(self, call: HostToolCall) -> ToolResult:
        try:
            args = BrowseCall.model_validate(call.input)
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "arguments"
            return ToolResult.fail("invalid_input", f"{TOOL}: {where}: {problem['msg']}")
        try:
            ctx = call.context
            browser = await self._worker.session(ctx.session_id, ctx.agent_id)
            async with browser.lock:
                try:
                    result = await self._act(browser, args, call)
                except Refused as refused:
                    result = ToolResult.fail(refused.code, refused.message)
            if browser.restarted:
                browser.restarted = False
                result.data["note"] = (
                    "the browser restarted since your last call: older tabs are gone"
                )
            return result
        except BrowserUnavailable as error:
            return ToolResult.fail(UNAVAILABLE, f"{TOOL}: {error.message}")
        except Exception as error:
            return self._failed(error)

    def _failed(self, error: Exception) -> ToolResult:
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        if isinstance(error, PlaywrightTimeout):
            seconds = self._worker.config.page_timeout_ms / 1000
            first = str(error).splitlines()[0]
            return ToolResult(
                status="timeout",
                error_code="timeout",
                summary=f"{TOOL}: no answer within {seconds:g} s ({first}); the page may "
                "still be loading: read it, or open another URL",
            )
        if isinstance(error, PlaywrightError) and _gone(str(error)):
            return ToolResult.fail(
                UNAVAILABLE,
                f"{TOOL}: the browser closed during the call (Chromium exited): retry in a "
                "few seconds; open tabs are gone",
            )
        if isinstance(error, PlaywrightError):
            first = str(error).splitlines()[0]
            return ToolResult.fail("browse_failed", f"{TOOL}: {first}")
        raise error

    async def _act(
        self, browser: SessionBrowser, args: BrowseCall, call: HostToolCall
    ) -> ToolResult:
        action = args.action
        if action == "open":
            return await self._open(browser, args)
        if action == "tabs":
            return actions.tabs(browser)
        if action == "switch":
            return actions.switch(browser, args)
        if action == "close_tab":
            return await actions.close_tab(browser, args)
        page, tab = actions.current_tab(browser, args)
        if action == "read":
            return await actions.read(page, tab, args)
        if action == "links":
            return await actions.links(page, tab, args)
        if action == "find":
            return await actions.find(page, tab, args)
        if action in ("click", "type"):
            return await actions.interact(page, tab, args)
        return await self._screenshot(page, tab, args, call)

    async def _open(self, browser: SessionBrowser, args: BrowseCall) -> ToolResult:
        if args.url is None:
            raise Refused("invalid_input", f'{TOOL}: action "open" needs a url')
        if (why := web_url(args.url)) is not None:
            raise Refused("invalid_input", f"{TOOL}: {why}")
        private = self._worker.config.allow_private_networks
        if not private and (why := await self._worker.refused(args.url)) is not None:
            raise Refused("blocked_address", f"{TOOL}: {why}")
        if args.new_tab or browser.active is None:
            if len(browser.tabs) >= self._worker.config.max_tabs:
                raise Refused(
                    "too_many_tabs",
                    f"{TOOL}: {len(browser.tabs)} tabs are open (browser.max_tabs): "
                    'close one with action "close_tab"',
                )
            page = await browser.context.new_page()
            browser.popped(page)  # the context's page event may have numbered it already
            browser.active = next(t for t, known in browser.tabs.items() if known is page)
        tab = browser.active
        assert tab is not None
        page = browser.tabs[tab]
        response = await page.goto(args.url, wait_until="domcontentloaded")
        read = await actions.read(page, tab, args)
        read.data.update(status=response.status if response is not None else None)
        return read

    async def _screenshot(
        self, page: Page, tab: int, args: BrowseCall, call: HostToolCall
    ) -> ToolResult:
        png = await page.screenshot(full_page=args.full_page, type="png")
        name = f"browser-tab{tab}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}.png"
        workspace = self._workspace_of(call)
        try:
            await asyncio.to_thread(_store_send, workspace, name, png)
        except OSError as error:  # a link or a file where .choirtmp/send should be
            raise Refused(
                "path_outside_workspace",
                f"{TOOL}: cannot save into .choirtmp/send/ ({error.strerror}): it must be a "
                "directory inside the workspace, not a link",
            ) from None
        path = f".choirtmp/send/{name}"
        return ToolResult.ok(
            f"screenshot of tab {tab} saved to {path} ({len(png)} bytes): it is sent to the user",
            path=path,
            bytes=len(png),
            tab=tab,
            url=page.url,
        )


def _gone(message: str) -> bool:
    return any(
        mark in message
        for mark in ("has been closed", "Target closed", "Connection closed", "crashed")
    )


def _store_send(workspace: Path, name: str, data: bytes) -> None:
    """Write `.choirtmp/send/<name>` without following a link the agent put there."""
    from choir.daemon.gateway.telegram.staging import scratch

    with scratch(workspace, "send", create=True) as dir_fd:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        tmp = f".{name}.part"
        fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
        try:
            owner = os.fstat(dir_fd)
            if os.geteuid() == 0 and owner.st_uid != 0:  # the agent may move or delete it
                os.fchown(fd, owner.st_uid, owner.st_gid)
            with os.fdopen(fd, "wb", closefd=False) as out:
                out.write(data)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
