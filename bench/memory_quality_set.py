"""The labelled evaluation set of `bench.memory_quality`: an agent's knowledge after months of
sessions, and questions with the items that answer them.

Each topic is what one agent learned about one thing over several sessions: a fact it stored
long ago, the correction or newer preference that superseded it (the answer now), sometimes a
tool call's one-line record that is the only evidence, and the questions a user asks about it —
in the items' words and in a paraphrase sharing none of them. The superseded item is labelled 0
(the agent must not answer with it); the current one 2; supporting items 1. Around them, noise:
`bench.memory_corpus` chunks stored as facts and tasks at all ages, some of them used often.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Item:
    name: str
    text: str
    kind: str
    days: float
    """Days since it was written (its last use, unless `uses`)."""
    uses: int = 0
    used_days: float | None = None
    """Days since its last use (None: never used since written)."""


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    gains: dict[str, int]
    """Item name -> graded relevance (2 the answer, 1 supporting, 0 superseded)."""
    paraphrase: bool = False


@dataclass(frozen=True, slots=True)
class Topic:
    items: list[Item]
    queries: list[Query] = field(default_factory=list)


def _conflict(
    key: str,
    old: str,
    new: str,
    kind: str,
    direct: str,
    paraphrase: str,
    support: str | None = None,
) -> Topic:
    items = [Item(f"{key}.old", old, "fact", 120), Item(f"{key}.now", new, kind, 4)]
    gains = {f"{key}.now": 2, f"{key}.old": 0}
    if support is not None:
        items.append(Item(f"{key}.log", support, "task", 5))
        gains[f"{key}.log"] = 1
    return Topic(items, [Query(direct, gains), Query(paraphrase, gains, paraphrase=True)])


TOPICS: list[Topic] = [
    _conflict(
        "deploy.host",
        "The deploy host for production is castor.",
        "Correction: production deploys now go to pollux; castor was retired.",
        "correction",
        "which host do production deploys go to",
        "where does the release get shipped",
        "tool call shell.run `ssh pollux ./deploy.sh` exited 0: release 4.2 deployed",
    ),
    _conflict(
        "user.drink",
        "The user drinks tea in the morning.",
        "The user switched to coffee; no more tea in the morning.",
        "preference",
        "what does the user drink in the morning",
        "how should I make their breakfast beverage",
    ),
    _conflict(
        "standup.time",
        "Standup is at 9:30 every weekday.",
        "Correction: standup moved to 10:15 since the team in Lisbon joined.",
        "correction",
        "when is standup",
        "what time is the daily team sync",
    ),
    _conflict(
        "db.port",
        "The staging database listens on port 5432.",
        "Correction: staging Postgres moved to port 6432 behind pgbouncer.",
        "correction",
        "which port does the staging database use",
        "how do I connect to the test environment's SQL server",
        "tool call shell.run `psql -p 6432 -h staging` connected: 48 tables",
    ),
    _conflict(
        "user.editor",
        "The user edits code with vim.",
        "The user now prefers helix over vim for editing.",
        "preference",
        "which editor does the user use",
        "what program do they write code in",
    ),
    _conflict(
        "invoice.owner",
        "Dana owns the invoice export.",
        "Correction: Goran took over the invoice export from Dana in March.",
        "correction",
        "who owns the invoice export",
        "whom do I ask about billing documents going out",
    ),
    _conflict(
        "release.day",
        "Releases ship on Thursdays.",
        "Correction: releases ship on Tuesdays now, to avoid Friday fixes.",
        "correction",
        "which day do releases ship",
        "when in the week does new software go out",
    ),
    _conflict(
        "user.units",
        "The user wants imperial units.",
        "The user asked for metric units from now on.",
        "preference",
        "which units does the user want",
        "should distances be in miles or kilometres for them",
    ),
    _conflict(
        "backup.bucket",
        "Nightly backups are written to the s3 bucket choir-backups-old.",
        "Correction: nightly backups go to the bucket choir-backups-eu since the migration.",
        "correction",
        "where are the nightly backups written",
        "which storage holds our copies made every night",
        "tool call shell.run `aws s3 ls choir-backups-eu` returned 31 lines",
    ),
    _conflict(
        "oncall",
        "Bob is on call for the payments service.",
        "Correction: Ines is on call for payments this quarter, Bob moved to search.",
        "correction",
        "who is on call for payments",
        "whom to page when checkout breaks at night",
    ),
    _conflict(
        "user.language",
        "The user wants answers in German.",
        "The user prefers answers in English now.",
        "preference",
        "which language should answers be in",
        "how should I talk to them",
    ),
    _conflict(
        "ci.runner",
        "CI runs on the self-hosted runner ci-01.",
        "Task: move CI from ci-01 to the hosted runners before the audit.",
        "task",
        "where does CI run",
        "which machines build our pull requests",
    ),
    Topic(
        [
            Item(
                "pods.restart",
                "tool call shell.run `kubectl get pods -n prod` returned: payments-api restarted "
                "14 times in the last hour",
                "task",
                2,
            )
        ],
        [
            Query("payments-api restarted", {"pods.restart": 2}),
            Query("which service kept crashing in production", {"pods.restart": 2}, True),
        ],
    ),
    Topic(
        [
            Item(
                "todo.notes",
                "tool call fs.write path=notes/todo.md wrote 3 lines: renew the TLS certificate, "
                "rotate the API key, archive Q3 reports",
                "task",
                6,
            )
        ],
        [
            Query("renew the TLS certificate", {"todo.notes": 2}),
            Query("what chores did I jot down for later", {"todo.notes": 2}, True),
        ],
    ),
]
