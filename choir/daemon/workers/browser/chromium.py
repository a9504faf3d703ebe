"""choird's browser worker (§18.2): one headless Chromium, one isolated context per session.

- **Chromium** starts with choird when `browser.enabled` (in the background: choird is ready
  before it is) and is supervised: when it exits, the worker drops every context, starts it
  again after a growing delay, and never takes choird down. Meanwhile calls answer
  `service_unavailable` with a retry hint (`BrowserUnavailable`).
- **Contexts**: a session gets its own `BrowserContext` (cookies, storage, cache and tabs of
  its own) when it starts — or at its first call, after a restart of Chromium or for an agent
  adopted from a previous choird — and loses it when it ends. The only key is the session id
  of the authenticated caller, so no agent can reach another's context.
- **Sandbox**: Chromium runs as choird's user with `--no-sandbox` (its setuid/namespace
  sandbox does not run as root in a container). What a page may reach is limited instead: only
  http(s) URLs are opened, and — unless `browser.allow_private_networks` — every request goes
  through `EgressProxy`, which refuses loopback, private and link-local addresses (redirects
  included), so the host-side browser is no way around the agent container's egress filter.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import urlsplit

from choir.config.browser import BrowserConfig
from choir.daemon.workers.browser.off import OFF
from choir.daemon.workers.egress_proxy import Allowed, EgressProxy, public_only
from choir.logs import get_logger

if TYPE_CHECKING:  # playwright loads only when the worker is enabled
    from playwright.async_api import Browser, BrowserContext, Page, Playwright

log = get_logger("choird.browser")

CHROMIUM_ARGS: Final = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)
"""Headless and quiet: no GPU, no calls home, no updates; /dev/shm is small in containers."""
LAUNCH_TIMEOUT_MS: Final = 30_000
RESTART_DELAYS_S: Final = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Waits before each successive restart; a Chromium that ran `STABLE_S` resets the count."""
STABLE_S: Final = 30.0
CLOSE_TIMEOUT_S: Final = 5.0

WorkerState = Literal["off", "starting", "running", "restarting", "failed"]


class BrowserUnavailable(Exception):
    """The browser cannot serve a call now; `message` says why and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class SessionBrowser:
    """One session's context and tabs; `lock` makes its calls one at a time."""

    session_id: str
    agent_id: str
    context: BrowserContext
    tabs: dict[int, Page] = field(default_factory=dict)
    active: int | None = None
    next_tab: int = 1
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    restarted: bool = False
    """Made again after Chromium restarted: the next answer says the old tabs are gone."""
    max_tabs: int = 8
    _closing: set[asyncio.Future[None]] = field(default_factory=set)

    def adopt(self, page: Page) -> int:
        """Number a new tab (opened by the agent, or by a page: a popup) and make it active."""
        tab = self.next_tab
        self.next_tab += 1
        self.tabs[tab] = page
        self.active = tab
        page.on("close", lambda _: self._closed(tab))
        return tab

    def popped(self, page: Page) -> None:
        """A page opened a tab (target=_blank, window.open); one the agent opened is known.
        Past `max_tabs` it is closed: a page cannot fill the browser with windows."""
        if page in self.tabs.values():
            return
        if len(self.tabs) >= self.max_tabs:
            closing = asyncio.ensure_future(page.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
            return
        self.adopt(page)

    def _closed(self, tab: int) -> None:
        self.tabs.pop(tab, None)
        if self.active == tab:
            self.active = max(self.tabs) if self.tabs else None


class BrowserWorker:
    """The worker; `async with` runs it (a no-op while `config.enabled` is false)."""

    def __init__(self, config: BrowserConfig, *, egress: Allowed = public_only) -> None:
        self.config = config
        self._allowed = egress
        """Which addresses pages may reach unless `allow_private_networks` (tests narrow it)."""
        self.state: WorkerState = "off"
        self.failure: str | None = None
        """Why Chromium could not start, while `state` is failed or restarting."""
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._sessions: dict[str, SessionBrowser] = {}
        self._known: dict[str, str] = {}
        """Sessions running now (id -> agent): those a context may be made for."""
        self._lost: set[str] = set()
        """Sessions whose context went with a Chromium that exited."""
        self._creating: dict[str, asyncio.Task[SessionBrowser]] = {}
        self._tasks: set[asyncio.Task[object]] = set()
        self._supervisor: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._gone = asyncio.Event()
        self._egress: EgressProxy | None = None
        """Where Chromium's requests go unless `allow_private_networks` (`egress_proxy`)."""
        self.restarts = 0

    async def __aenter__(self) -> BrowserWorker:
        if self.config.enabled and not self.config.allow_private_networks:
            self._egress = await EgressProxy(self._allowed).__aenter__()
        if self.config.enabled:
            self.state = "starting"
            self._supervisor = asyncio.create_task(self._supervise(), name="browser-worker")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            await asyncio.gather(self._supervisor, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._shutdown_browser()
        if self._egress is not None:
            await self._egress.__aexit__(None, None, None)
            self._egress = None

    # -- availability ------------------------------------------------------------------------

    def unavailable(self) -> str | None:
        """Why `choir.web.browse` cannot be offered to models now, or None. A restart in
        progress is not a reason: calls meanwhile answer `service_unavailable`."""
        if not self.config.enabled:
            return OFF
        if self.state == "failed":
            return f"the browser worker is not running: {self.failure}"
        return None

    async def wait_ready(self, timeout_s: float) -> bool:
        """Whether Chromium runs within `timeout_s` (tests and the bench)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._ready.wait()
        return self._ready.is_set()

    # -- sessions ----------------------------------------------------------------------------

    def session_started(self, session_id: str, agent_id: str) -> None:
        """Make the session's context now, in the background (its first call then finds it)."""
        self._known[session_id] = agent_id
        if self.state == "running":
            self._spawn(self._prepare(session_id))

    def session_ended(self, session_id: str) -> None:
        """Close the session's context and every tab in it."""
        self._known.pop(session_id, None)
        self._lost.discard(session_id)  # a context being made is closed when it is (`_make`)
        browser = self._sessions.pop(session_id, None)
        if browser is not None:
            self._spawn(_close(browser.context))

    def contexts(self) -> dict[str, str]:
        """The sessions that hold a context now, with their agents."""
        return {sid: browser.agent_id for sid, browser in self._sessions.items()}

    async def session(self, session_id: str, agent_id: str) -> SessionBrowser:
        """The session's browser, made if it has none yet; `BrowserUnavailable` while Chromium
        does not run."""
        self._known.setdefault(session_id, agent_id)
        found = self._sessions.get(session_id)
        if found is not None:
            return found
        self._require_running()
        task = self._creating.get(session_id)
        if task is None:
            task = asyncio.create_task(self._make(session_id, agent_id))
            self._creating[session_id] = task
            task.add_done_callback(lambda _: self._creating.pop(session_id, None))
        return await asyncio.shield(task)

    def _require_running(self) -> None:
        if self.state == "running" and self._browser is not None:
            return
        reason = self.unavailable()
        if reason is not None:
            raise BrowserUnavailable(reason)
        why = f" ({self.failure})" if self.failure else ""
        raise BrowserUnavailable(
            f"the browser is restarting after Chromium exited{why}: retry in a few seconds; "
            "tabs open before are gone"
            if self.restarts
            else "the browser is still starting: retry in a few seconds"
        )

    async def _prepare(self, session_id: str) -> None:
        agent_id = self._known.get(session_id)
        if agent_id is None:
            return
        try:
            await self.session(session_id, agent_id)
        except Exception as error:  # the first call makes it, or says why it cannot
            log.warning(
                "browser: no context made at agent start",
                fields={"session_id": session_id, "error": f"{type(error).__name__}: {error}"},
            )

    async def _make(self, session_id: str, agent_id: str) -> SessionBrowser:
        browser = self._browser
        assert browser is not None
        context = await browser.new_context(
            accept_downloads=False, service_workers="block", java_script_enabled=True
        )
        context.set_default_timeout(self.config.page_timeout_ms)
        context.set_default_navigation_timeout(self.config.page_timeout_ms)
        made = SessionBrowser(session_id, agent_id, context, max_tabs=self.config.max_tabs)
        context.on("page", made.popped)  # tabs a page opens (target=_blank, window.open)
        if session_id not in self._known or self._browser is not browser:
            await _close(context)  # the session ended, or Chromium restarted, meanwhile
            raise BrowserUnavailable("the session ended or the browser restarted: retry")
        made.restarted = session_id in self._lost
        self._lost.discard(session_id)
        self._sessions[session_id] = made
        log.info("browser: context made", fields={"session_id": session_id, "agent_id": agent_id})
        return made

    async def refused(self, url: str) -> str | None:
        """Why `open` may not load `url` (a private address), or None: a clear answer before
        Chromium tries (the egress proxy refuses it anyway, and every redirect and subresource)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None  # data:, blob: and the like stay inside the page
        host = parts.hostname
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, parts.port or 443)
        except OSError:
            return None  # Chromium fails to resolve it too, and says so
        for info in infos:
            if not self._allowed(str(info[4][0])):
                return (
                    f"{host} is a private or loopback address: the browser may not reach it "
                    "(browser.allow_private_networks in config.json)"
                )
        return None

    # -- Chromium ----------------------------------------------------------------------------

    async def _supervise(self) -> None:
        attempt = 0
        while True:
            if not os.access(self.config.executable, os.X_OK):
                self.state, self.failure = (
                    "failed",
                    (
                        f"Chromium is not at {self.config.executable}: install it "
                        "(apt-get install chromium) or set browser.executable in config.json"
                    ),
                )
                log.error("browser: " + self.failure)
                return
            started = time.monotonic()
            try:
                await self._launch()
            except Exception as error:
                self.failure = f"Chromium did not start: {type(error).__name__}: {error}"
                log.warning("browser: " + self.failure)
            else:
                await self._gone.wait()
                self.failure = "Chromium exited"
                log.warning("browser: Chromium exited; restarting it")
            self._ready.clear()
            await self._drop_all()
            if time.monotonic() - started > STABLE_S:
                attempt = 0
            self.state = "restarting"
            self.restarts += 1
            await asyncio.sleep(RESTART_DELAYS_S[min(attempt, len(RESTART_DELAYS_S) - 1)])
            attempt += 1

    async def _launch(self) -> None:
        from playwright.async_api import ProxySettings, async_playwright

        self._gone.clear()
        self._playwright = await async_playwright().start()
        proxy = None
        if self._egress is not None:  # every request, loopback included, through the proxy
            proxy = ProxySettings(server=self._egress.url, bypass="<-loopback>")
        self._browser = await self._playwright.chromium.launch(
            proxy=proxy,
            executable_path=self.config.executable,
            headless=True,
            args=list(CHROMIUM_ARGS),
            timeout=LAUNCH_TIMEOUT_MS,
            handle_sigint=False,
            handle_sigterm=False,
            handle_sighup=False,
        )
        self._browser.on("disconnected", lambda _: self._gone.set())
        self.state, self.failure = "running", None
        self._ready.set()
        log.info("browser: Chromium running", fields={"version": self._browser.version})
        for session_id in list(self._known):  # contexts for the agents running now
            self._spawn(self._prepare(session_id))

    async def _drop_all(self) -> None:
        """Forget every context (their Chromium is gone) and stop Playwright's driver."""
        self._lost |= set(self._sessions)
        self._sessions.clear()  # contexts being made fail with their browser (`_make`)
        await self._shutdown_browser()

    async def _shutdown_browser(self) -> None:
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = None
        self._ready.clear()
        if browser is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await browser.close()
        if playwright is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await playwright.stop()

    def _spawn(self, job: object) -> None:
        assert asyncio.iscoroutine(job)
        task: asyncio.Task[object] = asyncio.create_task(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _close(context: BrowserContext) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            await context.close()
