"""How fast one bot may talk (§19.7): per chat and across its chats, in pure arithmetic.

Telegram answers 429 to a bot that sends more than about one message a second to a chat
(short bursts pass) or about thirty a second in all. `Pacer` keeps a bot under both with
token buckets — one per chat (`CHAT_RATE_PER_S`, `CHAT_BURST`) and one for the bot
(`GLOBAL_RATE_PER_S`, `GLOBAL_BURST`, below Telegram's 30 so a bot never finds the edge) —
and remembers each chat's 429 `retry_after`, which holds back that chat alone (PTB's
`AIORateLimiter` stops every send of the bot on one 429).

No I/O and no clock: every call takes `now` (seconds on a monotonic clock), so the outbox
sleeps and the tests step time by hand. A send waits until its chat's bucket and then the
bot's have a token (`chat_wait_s`, `bot_wait_s`; the outbox lets one waiter at a time at
each, first come first served) and is charged to both at the moment it leaves (`sent`):
charged at the real send time, not at a time reserved in advance, the sends' times keep to
the buckets however late a sleeping sender wakes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

CHAT_RATE_PER_S: Final = 1.0
"""A chat's sustained rate (Telegram: "avoid more than one message per second")."""
CHAT_BURST: Final = 3
"""Messages a quiet chat may get at once (a reply cut into three parts leaves together)."""
GLOBAL_RATE_PER_S: Final = 25.0
"""A bot's sustained rate across its chats (Telegram's limit is about 30)."""
GLOBAL_BURST: Final = 4
"""Messages a quiet bot may send at once across its chats (with the rate: at most 29 in any
second)."""


@dataclass
class TokenBucket:
    """`rate_per_s` tokens a second, at most `burst` saved up; `tokens` as of `at`."""

    rate_per_s: float
    burst: float
    tokens: float
    at: float

    @classmethod
    def full(cls, rate_per_s: float, burst: float, now: float) -> TokenBucket:
        return cls(rate_per_s, burst, burst, now)

    def refill(self, now: float) -> None:
        if now > self.at:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate_per_s)
            self.at = now

    def wait_s(self, now: float) -> float:
        """Seconds until a whole token is there (0: now)."""
        self.refill(now)
        return max(0.0, (1.0 - self.tokens) / self.rate_per_s)

    def take(self, now: float) -> None:
        """One token spent at `now` (below zero if it was not there: later takers wait)."""
        self.refill(now)
        self.tokens -= 1.0


@dataclass
class ChatPace:
    """One chat's bucket and the end of its 429 backoff."""

    bucket: TokenBucket
    blocked_until: float = 0.0


@dataclass
class Pacer:
    """A bot's buckets: one per chat (its allowlisted DMs: a bounded few), one for the bot."""

    now: float
    """When the pacer was made: the bot's bucket starts full then."""
    chat_rate_per_s: float = CHAT_RATE_PER_S
    chat_burst: float = CHAT_BURST
    global_rate_per_s: float = GLOBAL_RATE_PER_S
    global_burst: float = GLOBAL_BURST
    chats: dict[int, ChatPace] = field(default_factory=dict)
    bot: TokenBucket = field(init=False)

    def __post_init__(self) -> None:
        self.bot = TokenBucket.full(self.global_rate_per_s, self.global_burst, self.now)

    def _chat(self, chat_id: int, now: float) -> ChatPace:
        pace = self.chats.get(chat_id)
        if pace is None:
            bucket = TokenBucket.full(self.chat_rate_per_s, self.chat_burst, now)
            pace = self.chats[chat_id] = ChatPace(bucket)
        return pace

    def chat_wait_s(self, chat_id: int, now: float) -> float:
        """Seconds the chat's next message waits for its own budget and backoff (0: none)."""
        pace = self._chat(chat_id, now)
        return max(pace.blocked_until - now, pace.bucket.wait_s(now), 0.0)

    def bot_wait_s(self, now: float) -> float:
        """Seconds until the bot's budget has a slot (0: now)."""
        return self.bot.wait_s(now)

    def sent(self, chat_id: int, now: float) -> None:
        """A message left for the chat at `now`: the chat's and the bot's budgets pay."""
        self._chat(chat_id, now).bucket.take(now)
        self.bot.take(now)

    def spare(self, now: float) -> bool:
        """Take a slot of the bot's budget only if one is free now (for hints that are
        worth nothing late: "typing…")."""
        if self.bot.wait_s(now) > 0:
            return False
        self.bot.take(now)
        return True

    def retry_after(self, chat_id: int, now: float, seconds: float) -> None:
        """Telegram answered the chat 429: nothing goes to it for `seconds`."""
        pace = self._chat(chat_id, now)
        pace.blocked_until = max(pace.blocked_until, now + seconds)

    def backoff(self, now: float) -> dict[int, float]:
        """Chats held back by a 429, and the seconds each has left."""
        return {
            chat_id: round(pace.blocked_until - now, 3)
            for chat_id, pace in sorted(self.chats.items())
            if pace.blocked_until > now
        }
