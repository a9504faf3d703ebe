"""secrets.json (§14): the authoritative store of secret values, name -> string, mode 0600.

Values are held as `SecretStr` so no repr, log line or error message can show them; the only way
to a value is an explicit `get_secret_value()` at the point of use.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import orjson
from pydantic import SecretStr

from choir.config.atomic import atomic_write
from choir.config.jsonparse import parse_json_object
from choir.config.names import secret_name_problem
from choir.errors import ConfigError, NotFoundError

SECRETS_SOURCE = "secrets.json"
SECRETS_MODE = 0o600


def parse_secrets(text: str) -> tuple[dict[str, SecretStr], list[str]]:
    """Decode secrets.json text; problems name keys and positions, never values."""
    parsed = parse_json_object(text, SECRETS_SOURCE)
    if parsed.data is None:
        return {}, parsed.problems
    problems = list(parsed.problems)
    values: dict[str, SecretStr] = {}
    for name, value in parsed.data.items():
        if problem := secret_name_problem(name):
            problems.append(f"{SECRETS_SOURCE}: {problem}")
        elif not isinstance(value, str):
            problems.append(f"{SECRETS_SOURCE}: secret {name!r} must be a JSON string")
        else:
            values[name] = SecretStr(value)
    return values, problems


def check_private(path: Path) -> None:
    """Refuse a secrets file that anyone but its owner can read or write."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        how = "readable" if mode & 0o044 else "writable"
        raise ConfigError(
            [f"{path.name} is {how} by group or others (mode {mode:04o}): run chmod 600 {path}"]
        )


@dataclass(frozen=True, repr=False)
class SecretStore:
    """An immutable set of named secrets; updates return a new store (swap, never mutate)."""

    _values: Mapping[str, SecretStr]

    @classmethod
    def empty(cls) -> SecretStore:
        return cls(MappingProxyType({}))

    @classmethod
    def parse(cls, text: str) -> SecretStore:
        values, problems = parse_secrets(text)
        if problems:
            raise ConfigError(problems, header=f"{SECRETS_SOURCE} has {len(problems)} problem(s):")
        return cls(MappingProxyType(values))

    @classmethod
    def load(cls, path: Path, *, missing_ok: bool = True) -> SecretStore:
        """Read `path`; a missing file is an empty store when `missing_ok`."""
        if not path.exists():
            if missing_ok:
                return cls.empty()
            raise NotFoundError(f"{path} does not exist: run choirctl init")
        check_private(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError([f"{SECRETS_SOURCE}: not valid UTF-8"]) from None
        return cls.parse(text)

    def save(self, path: Path) -> None:
        """Write atomically; the file is 0600 from the moment it exists."""
        atomic_write(path, self.to_json(), SECRETS_MODE)

    def to_json(self) -> bytes:
        plain = {name: value.get_secret_value() for name, value in self._values.items()}
        return orjson.dumps(plain, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"

    def names(self) -> list[str]:
        return sorted(self._values)

    def get(self, name: str) -> SecretStr:
        try:
            return self._values[name]
        except KeyError:
            raise NotFoundError(f"no secret named {name!r} (see choirctl secret list)") from None

    def with_secret(self, name: str, value: str) -> SecretStore:
        return SecretStore(MappingProxyType({**self._values, name: SecretStr(value)}))

    def without(self, name: str) -> SecretStore:
        self.get(name)
        return SecretStore(MappingProxyType({k: v for k, v in self._values.items() if k != name}))

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"SecretStore(names={self.names()!r})"
