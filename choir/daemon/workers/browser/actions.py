"""`choir.web.browse`'s actions on one session's browser, apart from the handler: reading the
page in chunks, its links, elements found by CSS selector or text and what is done to them, and
the tabs. Each answers a `ToolResult`, or raises `Refused` for a call that cannot run as asked.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final

from choir.daemon.workers.browser.chromium import SessionBrowser
from choir.daemon.workers.browser.off import TOOL
from choir.daemon.workers.browser.rules import MAX_LINKS, BrowseCall, chunk, clean_text, snippet
from choir.protocol import ToolResult

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

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


class Refused(Exception):
    """A call that cannot run as asked: the tool error `code` with `message`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def current_tab(browser: SessionBrowser, args: BrowseCall) -> tuple[Page, int]:
    tab = args.tab if args.tab is not None else browser.active
    if tab is None or tab not in browser.tabs:
        known = ", ".join(str(t) for t in sorted(browser.tabs)) or "none"
        raise Refused(
            "no_such_tab",
            f"{TOOL}: no tab {tab} (open tabs: {known}); open a URL first"
            if tab is not None
            else f'{TOOL}: no tab is open: use action "open" with a url first',
        )
    return browser.tabs[tab], tab


async def read(page: Page, tab: int, args: BrowseCall) -> ToolResult:
    if args.selector:
        matches = page.locator(args.selector)
        if await matches.count() == 0:
            raise Refused("not_found", f"{TOOL}: nothing on the page matches {args.selector!r}")
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


async def links(page: Page, tab: int, args: BrowseCall) -> ToolResult:
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
    raise Refused("invalid_input", f'{TOOL}: action "{args.action}" needs a selector or a text')


async def find(page: Page, tab: int, args: BrowseCall) -> ToolResult:
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


async def interact(page: Page, tab: int, args: BrowseCall) -> ToolResult:
    matches = _target(page, args)
    count = await matches.count()
    what = args.selector or args.text
    if args.index >= count:
        raise Refused(
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
            raise Refused("invalid_input", f'{TOOL}: action "type" needs a value')
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


def tabs(browser: SessionBrowser) -> ToolResult:
    tabs = [
        {"tab": tab, "url": page.url, "active": tab == browser.active}
        for tab, page in sorted(browser.tabs.items())
    ]
    return ToolResult.ok(f"{len(tabs)} tab(s) open; active: {browser.active}", tabs=tabs)


def switch(browser: SessionBrowser, args: BrowseCall) -> ToolResult:
    if args.tab is None:
        raise Refused("invalid_input", f'{TOOL}: action "switch" needs a tab')
    page, tab = current_tab(browser, args)
    browser.active = tab
    return ToolResult.ok(f"tab {tab} is active: {page.url}", tab=tab, url=page.url)


async def close_tab(browser: SessionBrowser, args: BrowseCall) -> ToolResult:
    page, tab = current_tab(browser, args)
    await page.close()
    browser.tabs.pop(tab, None)
    if browser.active == tab:
        browser.active = max(browser.tabs) if browser.tabs else None
    return ToolResult.ok(f"tab {tab} closed; active: {browser.active}", active=browser.active)
