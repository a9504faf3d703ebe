"""Log lines a peer can cause at will, throttled per peer: a flood costs a few lines, not the disk.

choird logs every refused agent call (an invalid lease, another agent's lease, a handler that
failed). An agent a prompt injection steers can make such calls as fast as its socket takes
them; one line each would fill the log, push real lines out into archives and fill the disk.
So each such line goes through a `ThrottledLog` keyed by who caused it (the agent's socket, the
HTTP client's host, the session): per key, `burst` lines are logged in a window of `window_s`;
the rest are counted, and when the window ends one line says how many were left out (fields
`suppressed` and `window_s`). While the flood goes on each window is twice as long as the last
(up to `max_window_s`) and logs only that count; a window without a suppressed line resets the
key. A flood of any length therefore costs about a dozen lines an hour per key, and a quiet
peer's first lines are always logged in full.

`Throttle` is the pure state of one key; `ThrottledLog` adds the clock, the logger, a bounded
table of keys (the least recently seen is dropped first, its count logged) and a timer on the
running event loop that logs a count when its window ends — without a loop, the count is logged
with the key's next line instead.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from choir.logs.logger import ChoirLogger

BURST: Final = 5
"""Lines logged in full per key before a window starts counting instead."""
WINDOW_S: Final = 5.0
"""The first window's length; each flooded window doubles the next…"""
MAX_WINDOW_S: Final = 300.0
"""…up to this."""
MAX_KEYS: Final = 256
"""Keys remembered at once: the table itself must not grow with a flood of new keys."""


@dataclass
class Throttle:
    """How many lines one key may still log in its window, and how many it has not."""

    burst: int = BURST
    window_s: float = WINDOW_S
    max_window_s: float = MAX_WINDOW_S
    window: float = field(init=False)
    """The current window's length."""
    ends: float = field(init=False, default=-math.inf)
    left: int = field(init=False, default=0)
    """Lines the current window still logs in full."""
    suppressed: int = field(init=False, default=0)
    """Lines counted instead of logged in the current window."""
    ended_window: float = field(init=False, default=0.0)
    """The length of the window `expire` ended last (what its count covers)."""

    def __post_init__(self) -> None:
        self.window = self.window_s

    def note(self, now: float) -> tuple[bool, int]:
        """One line at `now`: whether to log it, and the count of an ended window not yet
        reported (log that first)."""
        ended = self.expire(now)
        if self.left > 0:
            self.left -= 1
            return True, ended
        self.suppressed += 1
        return False, ended

    def expire(self, now: float) -> int:
        """End the window if it is over: how many lines it counted (0: nothing to report)."""
        if now < self.ends:
            return 0
        count, self.suppressed = self.suppressed, 0
        self.ended_window = self.window
        if count:  # the flood goes on: a longer window, reported only by its count
            self.window = min(self.window * 2, self.max_window_s)
            self.left = 0
        else:
            self.window = self.window_s
            self.left = self.burst
        self.ends = now + self.window
        return count


@dataclass
class _Key:
    throttle: Throttle
    fields: Mapping[str, Any]
    """The fields of the key's last line, repeated on its count."""
    timer: asyncio.TimerHandle | None = None
    loop: asyncio.AbstractEventLoop | None = None
    """The loop `timer` runs on (a table outliving its loop arms a new timer on the next)."""


class ThrottledLog:
    """A log line (a warning unless `level` says) throttled per key (see the module docstring)."""

    def __init__(
        self,
        log: ChoirLogger,
        message: str,
        *,
        level: int = logging.WARNING,
        burst: int = BURST,
        window_s: float = WINDOW_S,
        max_window_s: float = MAX_WINDOW_S,
        max_keys: int = MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self.message = message
        self.level = level
        self._limits = (burst, window_s, max_window_s)
        self._max_keys = max_keys
        self._clock = clock
        self._keys: OrderedDict[Hashable, _Key] = OrderedDict()

    def emit(self, key: Hashable, fields: Mapping[str, Any], *, exc_info: bool = False) -> None:
        """Log the message with `fields` for `key`, unless `key`'s window has had its lines."""
        entry = self._entry(key, fields)
        log_it, ended = entry.throttle.note(self._clock())
        if ended:
            self._report(entry, ended, entry.throttle.ended_window)
        entry.fields = fields
        if log_it:
            self._log.log(self.level, self.message, fields=fields, exc_info=exc_info)
        else:
            self._arm(key, entry)

    def _entry(self, key: Hashable, fields: Mapping[str, Any]) -> _Key:
        entry = self._keys.get(key)
        if entry is None:
            if len(self._keys) >= self._max_keys:
                self._drop_oldest()
            entry = self._keys[key] = _Key(Throttle(*self._limits), fields)
        self._keys.move_to_end(key)
        return entry

    def _drop_oldest(self) -> None:
        _, entry = self._keys.popitem(last=False)
        if entry.timer is not None:
            entry.timer.cancel()
        if entry.throttle.suppressed:
            self._report(entry, entry.throttle.suppressed, entry.throttle.window)

    def _arm(self, key: Hashable, entry: _Key) -> None:
        """Report the count when the window ends, if an event loop runs to say so."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # reported with the key's next line
        if entry.timer is not None and entry.loop is loop:
            return  # armed already
        delay = max(entry.throttle.ends - self._clock(), 0.0)
        entry.timer, entry.loop = loop.call_later(delay, self._window_ended, key), loop

    def _window_ended(self, key: Hashable) -> None:
        entry = self._keys.get(key)
        if entry is None:
            return
        entry.timer = None
        count = entry.throttle.expire(self._clock())
        if count:
            self._report(entry, count, entry.throttle.ended_window)
        if entry.throttle.suppressed:  # a later window is counting too (reported early)
            self._arm(key, entry)

    def _report(self, entry: _Key, count: int, window: float) -> None:
        fields = {**entry.fields, "suppressed": count, "window_s": window}
        self._log.log(self.level, self.message, fields=fields)
