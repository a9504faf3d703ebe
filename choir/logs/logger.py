"""`get_logger`: the stdlib logger with a `fields=` keyword for structured data.

    log = get_logger("choird.startup")
    log.info("postgres ready", fields={"host": host, "port": port})
    agent_log = log.bind(agent_id="alice")      # fields written on every line of agent_log

It is a `logging.LoggerAdapter`, so levels, handlers and propagation are plain stdlib logging and
third-party libraries' records reach the same files; the fields travel as `extra={"fields": …}`,
where `JsonLinesFormatter` finds them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from types import MappingProxyType
from typing import Any


class ChoirLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose calls accept `fields={...}`, merged over the fields bound with `bind`."""

    def __init__(self, logger: logging.Logger, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__(logger)
        self.fields: Mapping[str, Any] = MappingProxyType(dict(fields or {}))
        """The fields bound to this logger."""

    def bind(self, **fields: Any) -> ChoirLogger:
        """A logger for the same name that adds `fields` to every line."""
        return ChoirLogger(self.logger, {**self.fields, **fields})

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        call_fields: Mapping[str, Any] = kwargs.pop("fields", None) or {}
        extra = dict(kwargs.get("extra") or {})
        extra["fields"] = {**self.fields, **extra.get("fields", {}), **call_fields}
        kwargs["extra"] = extra
        return msg, kwargs


def get_logger(name: str, **fields: Any) -> ChoirLogger:
    """The logger `name` (dotted, e.g. `choird.gateway`), with `fields` bound to every line."""
    return ChoirLogger(logging.getLogger(name), fields)
