"""Two-phase configuration (§16.3, §17.6, §17.7): load stages, apply publishes.

choird runs one `RunningConfig` (a validated `$CHOIR_HOME` plus its `config_version`). `load`
validates the whole home and stages it only if every file is valid — a failed load leaves
nothing staged, so a later `apply` cannot publish an older staging by surprise. `apply` makes
the staged config the running one under a new version; agents notice the version in their next
heartbeat reply and fetch it. Secret values change only with `reload_secrets` (`choirctl secret
apply`): `config apply` never reloads them (§17.1).

Further differs (repos, tools, skills, identity — §17.6) plug in through `differs` once
`config load` fetches the repos; each receives the running config and the staged home.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from choir.config import ChoirConfig, LoadedConfig, SecretStore, load_home
from choir.daemon.staging.diff import (
    ConfigChange,
    as_running,
    choird_pending,
    config_changes,
    secret_changes,
)
from choir.errors import ConflictError
from choir.logs import get_logger, register_secrets

log = get_logger("choird.config")


def arm_log_redaction(secrets: SecretStore) -> None:
    """Redact every value of `secrets` from choird's logs from now on (choir.logs.redaction).

    Called wherever choird reads secrets.json — at start, when `config load` stages a home,
    at `secret apply` — and additive: a value rotated out stays redacted for the process.
    """
    register_secrets(secrets.get(name).get_secret_value() for name in secrets.names())


@dataclass(frozen=True)
class RunningConfig:
    """The configuration agents run, and its version (bumped by every apply)."""

    loaded: LoadedConfig
    version: int

    @property
    def config(self) -> ChoirConfig:
        return self.loaded.config


Differ = Callable[[RunningConfig, SecretStore, LoadedConfig], list[ConfigChange]]
"""(running, running secrets, staged home) -> the changes one part of the home makes."""


def config_json_differ(
    running: RunningConfig, secrets: SecretStore, staged: LoadedConfig
) -> list[ConfigChange]:
    return config_changes(running.config, staged.config)


def secrets_differ(
    running: RunningConfig, secrets: SecretStore, staged: LoadedConfig
) -> list[ConfigChange]:
    return secret_changes(secrets, staged.secrets)


DEFAULT_DIFFERS: tuple[Differ, ...] = (config_json_differ, secrets_differ)


@dataclass(frozen=True)
class AppliedConfig:
    version: int
    """The new running config_version."""
    changes: list[ConfigChange]
    """What the apply changed (all of it now in the running config)."""


class ConfigStage:
    """The running config, at most one staged config, and the secrets agents are served."""

    def __init__(
        self, loaded: LoadedConfig, *, version: int = 1, differs: Sequence[Differ] = DEFAULT_DIFFERS
    ) -> None:
        self._running = RunningConfig(loaded, version)
        self._started = loaded.config
        """What choird started with: sections read once at start run this until a restart."""
        self._staged: LoadedConfig | None = None
        self._secrets = loaded.secrets
        self._differs = tuple(differs)

    @property
    def running(self) -> RunningConfig:
        return self._running

    @property
    def started(self) -> ChoirConfig:
        """The config choird started with: what its gateways, DMs and listeners run."""
        return self._started

    @property
    def staged(self) -> LoadedConfig | None:
        return self._staged

    @property
    def secrets(self) -> SecretStore:
        """The secret values GET_SECRETS serves: as loaded at startup or by `reload_secrets`."""
        return self._secrets

    async def load(self) -> list[ConfigChange]:
        """Validate `$CHOIR_HOME` and stage it; returns the diff against the running config.

        Raises `ConfigError` listing every problem; then nothing is staged.
        """
        self._staged = None
        staged = await asyncio.to_thread(load_home, self._running.loaded.home)
        arm_log_redaction(staged.secrets)
        self._staged = staged
        log.info("config staged", fields={"config_hash": staged.config_hash})
        return self._diff_against(staged)

    def discard(self) -> None:
        """Drop the staged config (a check after `load` found it unusable)."""
        self._staged = None

    def diff(self) -> list[ConfigChange]:
        """Staged vs running, each change tagged hot-reload or restart-required."""
        return self._diff_against(self._require_staged())

    def apply(self) -> AppliedConfig:
        """Make the staged config the running one under the next config_version."""
        staged = self._require_staged()
        changes = self._diff_against(staged)
        self._running = RunningConfig(staged, self._running.version + 1)
        self._staged = None
        log.info(
            "config applied",
            fields={"config_version": self._running.version, "changes": len(changes)},
        )
        return AppliedConfig(self._running.version, changes)

    def bump(self) -> int:
        """Serve the running config under the next version, so heartbeats make agents refetch
        (a `model set` changed what one session is served); the new version."""
        self._running = RunningConfig(self._running.loaded, self._running.version + 1)
        return self._running.version

    def pending(self) -> list[ConfigChange]:
        """Applied changes that wait for a choird restart (its database, listeners, gateways…):
        the applied config against the one choird started with."""
        return choird_pending(self._started, self._running.config)

    def show(self) -> dict[str, Any]:
        """The config choird runs as JSON — a change waiting for a restart shown as it runs now,
        and listed in `pending` — with its version and hash (names of secrets only)."""
        pending = self.pending()
        return {
            "config_version": self._running.version,
            "config_hash": self._running.loaded.config_hash,
            "staged": self._staged is not None,
            "config": as_running(self._started, self._running.config),
            "pending": pending,
        }

    async def reload_secrets(self) -> SecretStore:
        """Re-read secrets.json (refusing one others can read) and serve it from now on."""
        path = self._running.loaded.home.secrets_file
        store = await asyncio.to_thread(SecretStore.load, path)
        arm_log_redaction(store)
        self._secrets = store
        log.info("secrets reloaded", fields={"secrets": len(store)})
        return store

    def _require_staged(self) -> LoadedConfig:
        if self._staged is None:
            raise ConflictError("no config is staged: run choirctl config load first")
        return self._staged

    def _diff_against(self, staged: LoadedConfig) -> list[ConfigChange]:
        return [
            change
            for differ in self._differs
            for change in differ(self._running, self._secrets, staged)
        ]
