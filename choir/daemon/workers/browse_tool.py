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
import contextlib
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from choir.daemon.agents.host_tools import HostToolCall, HostTools
from choir.daemon.workers.browse_rules import (
    MAX_LINKS,
    BrowseCall,
    chunk,
    clean_text,
    snippet,
    web_url,
)
from choir.daemon.workers.browser import BrowserUnavailable, BrowserWorker, SessionBrowser
from choir.protocol import ToolResult

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

TOOL: Final = "choir.web.browse"
UNAVAILABLE: Final = "service_unavailable"
LINKS_JS: Final = """() => Array.from(document.querySelectorAll('a[href]')).map(a =>
  [(a.innerText || a.getAttribute('aria-label') || a.title || '').trim(), a.href])"""
PAGE_TEXT_JS: Final = "() => [document.title, document.body ? document.body.innerText : '']"
"""The title and the rendered text (a page still loading may have no body yet)."""
MAX_FOUND: Final = 20
"""Elements one `find` describes (two round trips to the page each)."""
MAX_URL_CHARS: Final = 2_000
"""A link's URL as listed (a `data:` href can be megabytes)."""
SETTLE_MS: Final = 2_000
"""How long a click or a submit waits for the page it may have started to load."""

WorkspaceOf = Callable[[HostToolCall], Path]
"""The calling session's workspace directory on the host."""


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


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
                except _Refused as refused:
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
            return _tabs(browser)
        if action == "switch":
            return _switch(browser, args)
        if action == "close_tab":
            return await _close_tab(browser, args)
        page, tab = _current(browser, args)
        if action == "read":
            return await _read(page, tab, args)
        if action == "links":
            return await _links(page, tab, args)
        if action == "find":
            return await _find(page, tab, args)
        if action in ("click", "type"):
            return await _interact(page, tab, args)
        return await self._screenshot(page, tab, args, call)

    async def _open(self, browser: SessionBrowser, args: BrowseCall) -> ToolResult:
        if args.url is None:
            raise _Refused("invalid_input", f'{TOOL}: action "open" needs a url')
        if (why := web_url(args.url)) is not None:
            raise _Refused("invalid_input", f"{TOOL}: {why}")
        private = self._worker.config.allow_private_networks
        if not private and (why := await self._worker.refused(args.url)) is not None:
            raise _Refused("blocked_address", f"{TOOL}: {why}")
        if args.new_tab or browser.active is None:
            if len(browser.tabs) >= self._worker.config.max_tabs:
                raise _Refused(
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
        read = await _read(page, tab, args)
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
            raise _Refused(
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


def _current(browser: SessionBrowser, args: BrowseCall) -> tuple[Page, int]:
    tab = args.tab if args.tab is not None else browser.active
    if tab is None or tab not in browser.tabs:
        known = ", ".join(str(t) for t in sorted(browser.tabs)) or "none"
        raise _Refused(
            "no_such_tab",
            f"{TOOL}: no tab {tab} (open tabs: {known}); open a URL first"
            if tab is not None
            else f'{TOOL}: no tab is open: use action "open" with a url first',
        )
    return browser.tabs[tab], tab


async def _read(page: Page, tab: int, args: BrowseCall) -> ToolResult:
    if args.selector:
        matches = page.locator(args.selector)
        if await matches.count() == 0:
            raise _Refused("not_found", f"{TOOL}: nothing on the page matches {args.selector!r}")
        title, raw = await page.title(), await matches.first.inner_text()
    else:  # one round trip to the page: what `open` pays on every call
        title, raw = await page.evaluate(PAGE_TEXT_JS)
    text = clean_text(raw)
    part = chunk(text, args.offset, args.chars)
    more = (
        f"; more from offset {part.next_offset} (action read)"
        if part.next_offset is not None
        else ""
    )
    return ToolResult(
        status="success",
        summary=f"tab {tab}: {title or page.url} — characters {part.offset}-"
        f"{part.offset + len(part.text)} of {part.total}{more}",
        data={
            "tab": tab,
            "url": page.url,
            "title": title,
            "text": part.text,
            "offset": part.offset,
            "total_chars": part.total,
            "next_offset": part.next_offset,
        },
        truncated=part.next_offset is not None,
    )


async def _links(page: Page, tab: int, args: BrowseCall) -> ToolResult:
    found: list[list[str]] = await page.evaluate(LINKS_JS)
    shown = found[args.offset : args.offset + MAX_LINKS]
    end = args.offset + len(shown)
    links = [{"text": snippet(text), "url": url[:MAX_URL_CHARS]} for text, url in shown]
    return ToolResult(
        status="success",
        summary=f"tab {tab}: links {args.offset}-{end} of {len(found)}",
        data={
            "tab": tab,
            "url": page.url,
            "links": links,
            "total": len(found),
            "next_offset": end if end < len(found) else None,
        },
        truncated=end < len(found),
    )


def _target(page: Page, args: BrowseCall) -> Locator:
    if args.selector:
        return page.locator(args.selector)
    if args.text:
        return page.get_by_text(args.text)
    raise _Refused("invalid_input", f'{TOOL}: action "{args.action}" needs a selector or a text')


async def _find(page: Page, tab: int, args: BrowseCall) -> ToolResult:
    matches = _target(page, args)
    count = await matches.count()
    elements: list[dict[str, Any]] = []
    for index in range(args.offset, min(count, args.offset + MAX_FOUND)):
        element = matches.nth(index)
        described = await element.evaluate(
            "e => [e.tagName.toLowerCase(), e.innerText || e.value || e.getAttribute('placeholder')"
            " || '', e.getAttribute('name') || '', e.getAttribute('type') || '']"
        )
        tag, text, name, kind = described
        elements.append(
            {
                "index": index,
                "tag": tag,
                "text": snippet(str(text)),
                **({"name": name} if name else {}),
                **({"type": kind} if kind else {}),
                "visible": await element.is_visible(),
            }
        )
    what = args.selector or args.text
    return ToolResult.ok(
        f"tab {tab}: {count} element(s) match {what!r}", tab=tab, elements=elements, total=count
    )


async def _interact(page: Page, tab: int, args: BrowseCall) -> ToolResult:
    matches = _target(page, args)
    count = await matches.count()
    what = args.selector or args.text
    if args.index >= count:
        raise _Refused(
            "not_found",
            f"{TOOL}: {count} element(s) match {what!r}, so there is no index {args.index}",
        )
    element = matches.nth(args.index)
    before = page.url
    if args.action == "click":
        await element.click()
        did = f"clicked {what!r}"
    else:
        if args.value is None:
            raise _Refused("invalid_input", f'{TOOL}: action "type" needs a value')
        await element.fill(args.value)
        did = f"typed {len(args.value)} characters into {what!r}"
        if args.submit:
            await element.press("Enter")
            did += " and pressed Enter"
    with contextlib.suppress(Exception):  # a load it started, bounded; none is fine too
        await page.wait_for_load_state("domcontentloaded", timeout=SETTLE_MS)
    title = await page.title()
    moved = f"; now at {page.url}" if page.url != before else ""
    return ToolResult.ok(f"tab {tab}: {did}{moved}", tab=tab, url=page.url, title=title)


def _tabs(browser: SessionBrowser) -> ToolResult:
    tabs = [
        {"tab": tab, "url": page.url, "active": tab == browser.active}
        for tab, page in sorted(browser.tabs.items())
    ]
    return ToolResult.ok(f"{len(tabs)} tab(s) open; active: {browser.active}", tabs=tabs)


def _switch(browser: SessionBrowser, args: BrowseCall) -> ToolResult:
    if args.tab is None:
        raise _Refused("invalid_input", f'{TOOL}: action "switch" needs a tab')
    page, tab = _current(browser, args)
    browser.active = tab
    return ToolResult.ok(f"tab {tab} is active: {page.url}", tab=tab, url=page.url)


async def _close_tab(browser: SessionBrowser, args: BrowseCall) -> ToolResult:
    page, tab = _current(browser, args)
    await page.close()
    browser.tabs.pop(tab, None)
    if browser.active == tab:
        browser.active = max(browser.tabs) if browser.tabs else None
    return ToolResult.ok(f"tab {tab} closed; active: {browser.active}", active=browser.active)


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
