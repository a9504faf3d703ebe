"""The agent's hot-reloadable config and its secrets: immutable snapshots, swapped whole.

§16.3 and §17.7: a new config version arrives as one blob (FETCH_DYNAMIC_CONFIG) and replaces
the old one in a single reference assignment, so no reader ever sees half of each; §14.3: secrets
likewise, never mutated in place. A tool execution or an LLM call takes `current()` (and
`secrets()`) once when it starts and uses that snapshot to its end, so a reload never changes an
operation already in flight. Reference assignment is atomic in CPython, so no lock is needed even
for readers on worker threads. The snapshots are deep-frozen: holding one is safe forever.

Budgets (§7.6) are the one part read at every check rather than once per operation: a lowered
budget applies at the next check in running sessions (`budget_limits`, followed by the lanes).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pydantic import SecretStr, ValidationError

from choir.config import Budgets
from choir.core.budgets import BudgetLimits
from choir.errors import NotFoundError
from choir.protocol import ResourceBindings

ConfigListener = Callable[["DynamicConfig"], None]


@dataclass(frozen=True, slots=True)
class DynamicConfig:
    """One published config version (the `dynamic_config` blob choird serves), read-only."""

    version: int
    """choird's config_version; 0 until the first fetch."""
    data: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The blob, deep-frozen: mappings are read-only proxies, lists are tuples."""
    _bindings: ResourceBindings | None = field(init=False, repr=False, compare=False)
    """`bindings`, validated once per version: the lanes read them at every model call."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_bindings", _bindings_of(self.data))

    @classmethod
    def of(cls, version: int, blob: Mapping[str, Any]) -> DynamicConfig:
        frozen = _freeze(blob)
        assert isinstance(frozen, MappingProxyType)
        return cls(version, frozen)

    @property
    def bindings(self) -> ResourceBindings | None:
        """The session's resource bindings, as the blob carries them (None before a fetch)."""
        return self._bindings

    def budget_limits(self) -> BudgetLimits:
        """The session's budgets (§7.6): the blob's `budgets` over the defaults.

        ValueError or TypeError when the blob's budgets are not valid ones (choird validates
        config before publishing it, so only a choird of another version could send them).
        """
        configured = self.data.get("budgets")
        given = _thaw(configured) if isinstance(configured, Mapping) else {}
        return BudgetLimits(**{**Budgets().model_dump(), **given})

    def secret_names(self) -> frozenset[str]:
        """The secrets this session may fetch: the `secret` fields of its bound resources.

        The agent's view of choird's `allowed_secrets`: the bound model, the voice profile's TTS,
        the bound git identity (its token and SSH key), Notion integration and email account,
        and every search provider.
        """
        bindings = self.bindings
        if bindings is None:
            return frozenset()
        names = [_secret(self.data.get("models"), bindings.llm)]
        profile = _section(self.data.get("voice_profiles")).get(bindings.voice_profile or "")
        if isinstance(profile, Mapping):
            names.append(_secret(self.data.get("tts"), str(profile.get("tts", ""))))
        bound = _section(self.data.get("bound"))
        names.extend(_secret(bound, kind) for kind in ("git_identity", "notion", "email"))
        names.append(_secret(bound, "git_identity", field="ssh_key_secret"))
        search = _section(self.data.get("search"))
        names.extend(_secret(search, name) for name in search)
        return frozenset(name for name in names if name)


@dataclass(frozen=True, slots=True)
class Secrets:
    """Secret values by name; the repr shows names only, and nothing here ever logs a value."""

    values: Mapping[str, SecretStr] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, values: Mapping[str, SecretStr]) -> Secrets:
        return cls(MappingProxyType(dict(values)))

    def reveal(self, name: str) -> str:
        """The value of `name`, for the one tool call that needs it."""
        secret = self.values.get(name)
        if secret is None:
            raise NotFoundError(
                f"secret {name} is not available to this session: bind the resource that "
                "names it, then choirctl secret apply"
            )
        return secret.get_secret_value()

    def names(self) -> frozenset[str]:
        return frozenset(self.values)

    def replaced(self, fresh: Mapping[str, SecretStr], *, keep: Collection[str]) -> Secrets:
        """A new snapshot: `fresh` values over ours, limited to `keep` plus `fresh`'s names."""
        merged = {name: value for name, value in self.values.items() if name in keep}
        merged.update(fresh)
        return Secrets.of(merged)

    def __repr__(self) -> str:
        return f"Secrets(names={sorted(self.values)})"


class DynamicState:
    """The current config and secrets snapshots of one agent process."""

    def __init__(self, config: DynamicConfig | None = None, secrets: Secrets | None = None) -> None:
        self._config = config or DynamicConfig(0)
        self._secrets = secrets or Secrets()
        self._listeners: list[ConfigListener] = []
        self._secret_listeners: list[Callable[[Secrets], None]] = []

    def current(self) -> DynamicConfig:
        """The config snapshot to use for one whole operation (take it once, at its start)."""
        return self._config

    def secrets(self) -> Secrets:
        """The secrets snapshot to use for one whole operation."""
        return self._secrets

    def swap_config(self, config: DynamicConfig) -> None:
        """Make `config` current: choird's published version is the authority, even if lower
        (a choird restarted from an older state); operations in flight keep their snapshot."""
        self._config = config
        for listener in tuple(self._listeners):
            listener(config)

    def swap_secrets(self, secrets: Secrets) -> None:
        self._secrets = secrets
        for listener in tuple(self._secret_listeners):
            listener(secrets)

    def subscribe_secrets(self, listener: Callable[[Secrets], None]) -> Callable[[], None]:
        """Call `listener` after each secrets swap; returns the unsubscribe callable."""
        self._secret_listeners.append(listener)
        return lambda: self._secret_listeners.remove(listener)

    def subscribe(self, listener: ConfigListener) -> Callable[[], None]:
        """Call `listener` after each config swap; returns the unsubscribe callable."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)


def _bindings_of(data: Mapping[str, Any]) -> ResourceBindings | None:
    raw = data.get("bindings")
    if raw is None:
        return None
    try:
        return ResourceBindings.model_validate(_thaw(raw))
    except ValidationError:
        return None


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({str(key): _freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_thaw(item) for item in value]
    return value


def _section(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else MappingProxyType({})


def _secret(section: Any, name: str, *, field: str = "secret") -> str | None:
    entry = _section(section).get(name)
    if not isinstance(entry, Mapping):
        return None
    secret = entry.get(field)
    return secret if isinstance(secret, str) else None
