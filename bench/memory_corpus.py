"""Deterministic, varied session-memory text for the search figures of `bench.memory`.

Each chunk reads like one block of a session (§11.4): a tool call with its result, a chat turn,
a skill phase, a note — one to three sentences built from a few hundred words, so that texts
differ in wording and topic rather than only in numbers, and vectors are not near-duplicates.
About a third of the chunks mention running tests, which makes `test` the common term.
"""

from __future__ import annotations

import random
from typing import Final

COMMON_TERM: Final = "test"

_SUBJECTS: Final = (
    "parser",
    "login form",
    "retry loop",
    "cache layer",
    "invoice export",
    "schema migration",
    "search index",
    "billing job",
    "upload handler",
    "session store",
    "rate limiter",
    "email digest",
    "config loader",
    "audit log",
    "permissions check",
    "report builder",
    "webhook relay",
    "image resizer",
    "queue consumer",
    "backup script",
    "feature flag",
    "payment gateway",
    "calendar sync",
    "notification service",
    "dashboard chart",
    "csv importer",
    "pdf renderer",
    "oauth callback",
    "cron scheduler",
    "metrics exporter",
)
_PROBLEMS: Final = (
    "times out under load",
    "drops the last row",
    "leaks file handles",
    "double-charges",
    "returns stale data",
    "crashes on empty input",
    "ignores the timezone",
    "deadlocks",
    "logs the token",
    "rounds amounts wrongly",
    "skips retries",
    "reads before the lock",
    "loses unicode characters",
    "sends duplicates",
    "hangs after a reconnect",
)
_FILES: Final = tuple(
    f"{top}/{name}.{ext}"
    for top, name, ext in (
        ("src/app", "config", "py"),
        ("src/billing", "invoice", "py"),
        ("web", "login", "ts"),
        ("api", "handlers", "go"),
        ("jobs", "nightly", "py"),
        ("lib", "cache", "rs"),
        ("scripts", "deploy", "sh"),
        ("docs", "runbook", "md"),
        ("db", "migrations", "sql"),
        ("services", "mailer", "py"),
        ("ui", "chart", "tsx"),
        ("core", "queue", "py"),
    )
)
_PEOPLE: Final = ("Alice", "Bob", "Chen", "Dana", "Eitan", "Fatima", "Goran", "Hana", "Ines")
_TOPICS: Final = (
    "quarterly budget",
    "hiring plan",
    "vendor contract",
    "roadmap",
    "on-call rotation",
    "security review",
    "customer escalation",
    "offsite agenda",
    "pricing change",
    "data retention policy",
    "accessibility audit",
    "cloud costs",
    "release train",
)
_PREFS: Final = (
    "short answers",
    "tea over coffee",
    "dark mode",
    "metric units",
    "email over calls",
    "bullet points",
    "morning meetings",
    "British spelling",
    "no emojis",
    "weekly summaries",
)
_DAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next week")
_TOOLS: Final = ("fs.read", "fs.write", "shell.run", "git.diff", "web.fetch", "notion.search")
_VERBS: Final = ("refactor", "fix", "review", "document", "speed up", "simplify", "rewrite")

_TEMPLATES: Final = (
    "tool call shell.run `pytest {file}` exited {code}: {n} tests passed, {m} failed; "
    "the failing test covers the {subject}",
    "ran the test suite again after changing {file}; the {subject} test still {problem}",
    "tool call {tool} path={file} returned {n} lines; the {subject} is defined near line {m}",
    "user: can you {verb} the {subject} in {file} before {day}?",
    "assistant: I will {verb} the {subject}; it {problem} only when the {other} is busy",
    "the {subject} {problem} because {file} is read before the lock is taken",
    "note: {person} prefers {pref}; answers about the {topic} go to {person2}",
    "meeting with {person} on {day} about the {topic}; action: {verb} the {subject}",
    "skill triage phase {phase} finished: {n} files changed in {file}, {m} tests added",
    "wrote a regression test for the {subject}: it {problem} when {other} is empty",
    "git.diff shows {n} changed lines in {file}; the {subject} and the {other} both moved",
    "reminder for {day}: {verb} the {topic} notes and send them to {person}",
    "web.fetch of the {subject} docs: the upstream fix for '{problem}' ships in {n}.{m}",
    "the {other} dashboard shows the {subject} {problem} since the {topic} change",
    "{person} reported that the {subject} {problem}; reproduced with {file}, no test yet",
)
_PHASES: Final = ("plan", "apply", "verify", "report")


def session_texts(count: int, seed: int = 14) -> list[str]:
    """`count` chunk texts, the same for the same seed."""
    rng = random.Random(seed)
    return [_sentence(rng) + _maybe_more(rng) for _ in range(count)]


def query_texts(count: int, seed: int = 41) -> list[str]:
    """Questions an agent would ask its memory (`count`, deterministic)."""
    rng = random.Random(seed)
    forms = (
        "why does the {subject} fail",
        "what did {person} say about the {topic}",
        "which test covers the {subject} in {file}",
        "what does the user prefer: {pref}",
        "when is the meeting about the {topic}",
        "how did we fix the {subject} that {problem}",
    )
    return [rng.choice(forms).format(**_fields(rng)) for _ in range(count)]


def _sentence(rng: random.Random) -> str:
    return rng.choice(_TEMPLATES).format(**_fields(rng))


def _maybe_more(rng: random.Random) -> str:
    extra = rng.choice((0, 0, 1, 2))
    return "".join(". " + _sentence(rng) for _ in range(extra))


def _fields(rng: random.Random) -> dict[str, object]:
    subject, other = rng.sample(_SUBJECTS, 2)
    person, person2 = rng.sample(_PEOPLE, 2)
    return {
        "subject": subject,
        "other": other,
        "problem": rng.choice(_PROBLEMS),
        "file": rng.choice(_FILES),
        "person": person,
        "person2": person2,
        "topic": rng.choice(_TOPICS),
        "pref": rng.choice(_PREFS),
        "day": rng.choice(_DAYS),
        "tool": rng.choice(_TOOLS),
        "verb": rng.choice(_VERBS),
        "phase": rng.choice(_PHASES),
        "code": rng.choice((0, 1)),
        "n": rng.randint(1, 400),
        "m": rng.randint(0, 59),
    }
