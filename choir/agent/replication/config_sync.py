"""Config and secret sync (§16.3, §17.7, §14.3): fetch what choird published, swap it in whole.

Heartbeat replies carry `config_version_latest`; a `config_changed` push says the same sooner.
Either way `notice_version` records the wish and this object's own task does the fetch, so a slow
fetch never delays a heartbeat. A failed fetch keeps the current config running and is retried
(with backoff, and again at the next heartbeat) — §17.7 "Failure during apply". A
`secrets_refreshed` push names the changed secrets; they are re-fetched with GET_SECRETS and the
whole secrets snapshot is swapped. Values are never logged: only names and counts are.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Collection
from types import TracebackType
from typing import Self

from choir.agent.replication.backoff import Backoff
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.live_config import DynamicConfig, DynamicState
from choir.logs import get_logger
from choir.protocol import FetchDynamicConfigRequest, GetSecretsRequest, ServerPush
from choir.transport import RpcError, TransportError

log = get_logger("choir.agent.config_sync")


class ConfigSync:
    """Keeps `state` at choird's latest config version and secret values."""

    def __init__(
        self, control_plane: ControlPlane, state: DynamicState, *, backoff: Backoff | None = None
    ) -> None:
        self.state = state
        self._cp = control_plane
        self._backoff = backoff or Backoff()
        self._wanted_version: int | None = None
        """A version choird announced that differs from ours; None when in sync."""
        self._wanted_secrets: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def version(self) -> int:
        """The config version the agent runs (what heartbeats report)."""
        return self.state.current().version

    async def load(self) -> DynamicConfig:
        """Fetch the published config and every secret it binds, now (start-up; raises)."""
        await self._fetch_config()
        await self._fetch_secrets(self.state.current().secret_names())
        return self.state.current()

    def notice_version(self, latest: int) -> None:
        """choird publishes `latest`; fetch it if it is not what runs (§16.3 "if mismatch")."""
        if latest != self.version and latest != self._wanted_version:
            self._wanted_version = latest
            self._wake.set()

    def want_secrets(self, names: Collection[str]) -> None:
        """Re-fetch `names` (all bound secrets when empty) and swap the secrets snapshot."""
        self._wanted_secrets.update(names or self.state.current().secret_names())
        self._wake.set()

    def notice(self, push: ServerPush) -> bool:
        """Act on a `config_changed` or `secrets_refreshed` push; False for any other kind."""
        if push.kind == "config_changed":
            self.notice_version(push.config_version)
            return True
        if push.kind == "secrets_refreshed":
            self.want_secrets(push.secrets)
            return True
        return False

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="config-sync")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _run(self) -> None:
        failures = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._sync_once()
            except TransportError as error:
                if failures == 0:
                    log.warning("config sync failed; retrying", fields={"error": str(error)})
                await asyncio.sleep(self._backoff.delay(failures, random.random()))
                failures += 1
                self._wake.set()
            except RpcError as error:  # refused: the next heartbeat's mismatch retries it
                log.warning("config fetch refused", fields={"error": str(error)})
            else:
                failures = 0

    async def _sync_once(self) -> None:
        if self._wanted_version is not None:
            self._wanted_version = None
            try:
                await self._fetch_config()
            except BaseException:
                self._wanted_version = -1  # any later notice differs: fetch again
                raise
            # a rebinding (`model set`) may bring secrets this session has not fetched yet
            self._wanted_secrets |= (
                self.state.current().secret_names() - self.state.secrets().names()
            )
        if self._wanted_secrets:
            names = set(self._wanted_secrets)
            try:
                await self._fetch_secrets(names)
            except RpcError as error:  # refused or unset: retrying cannot help
                log.warning(
                    "secret refresh refused", fields={"secrets": sorted(names), "error": str(error)}
                )
            self._wanted_secrets -= names

    async def _fetch_config(self) -> None:
        request = FetchDynamicConfigRequest(current_config_version=self.version)
        answer = await self._cp.fetch_dynamic_config(request)
        if answer.config is None:
            return
        config = DynamicConfig.of(answer.config_version, answer.config)
        self.state.swap_config(config)
        log.info("config applied", fields={"config_version": config.version})

    async def _fetch_secrets(self, names: Collection[str]) -> None:
        if not names:
            return
        answer = await self._cp.get_secrets(GetSecretsRequest(resources=sorted(names)))
        keep = self.state.current().secret_names() or self.state.secrets().names()
        self.state.swap_secrets(self.state.secrets().replaced(answer.secrets, keep=keep))
        log.info("secrets refreshed", fields={"secrets": sorted(answer.secrets)})
