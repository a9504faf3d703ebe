"""The demo model: what an agent talks to when no real model is configured (`provider: scripted`).

It is a script, not an LLM, and says so. It greets, explains how to connect a real model, and on
request makes one real tool call (`choir.core.list`, harmless and always available to edge) so a
new operator sees the whole loop work, stores what it is told to remember in its knowledge base
and finds it again later (`choir.memory.upsert`, `choir.memory.query`: memory outlives a
session), or proposes a tool (`choir.propose.tool`) so there is an
approval to answer in `choir tui` or with `choirctl approval`. Every step repeats and the last
one matches anything, so it never runs out. Deterministic: the same message always gets the
same answer.
"""

from __future__ import annotations

import json
from typing import Final

from choir.scripted.script import ReplyStep, Script, ScriptedCall, ToolCallsStep

DEMO_MODEL_ID: Final = "choir-demo"
"""The `model` of the demo model in the embedded default config."""

DEMO_TOOL: Final = "choir.core.list"
"""The tool the demo calls: read-only and offered to the edge lane."""
MEMORY_WRITE: Final = "choir.memory.upsert"
MEMORY_READ: Final = "choir.memory.query"

INTRO: Final = (
    "I'm choir's demo model: a short script, not a real LLM, so I can't work on tasks yet."
)

SETUP: Final = (
    "To use a real model: export OPENROUTER_API_KEY before `choir up`, or store a key with "
    '`choirctl secret set openrouter-key`; then add a model to config.json under "models" '
    '(provider "openrouter", endpoint "https://openrouter.ai/api/v1", a model such as '
    '"anthropic/claude-sonnet-4", secret "openrouter-key"), make it the agent\'s defaults.llm '
    "and run `choirctl config load`."
)

MENU: Final = (
    "Say 'demo' to watch me call a tool, 'propose' to get a proposal to approve, 'remember "
    "<something>' and later 'recall <a word of it>' to see memory outlive a session, or 'help' "
    "to learn how to connect a real model."
)

PROPOSAL: Final = {
    "manifest": {
        "llm": {
            "name": "demo.greet",
            "description": "Greet someone by name.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
        "runtime": {
            "implementation": "external",
            "timeout_ms": 5000,
            "locks": [],
            "network": False,
            "secret_resources": [],
            "side_effect": "none",
            "idempotent": True,
        },
    },
    "intended_behavior": "Return 'Hello, <name>!' for the given name.",
    "rationale": "A demo proposal, so you can see approvals work end to end.",
}
"""What the demo proposes: a harmless tool, for the operator to approve or reject."""

SUMMARY_REQUEST: Final = "Summarize this session for long-term memory"
"""How the agent's session summary request at stop begins (`choir.agent.lanes.summary`)."""
SUMMARY: Final = json.dumps(
    {
        "summary": "The session talked to choir's demo model, a script rather than an LLM.",
        "topics": ["demo"],
        "decisions": [],
        "open_items": ["connect a real model"],
    }
)
"""The demo's session summary: a valid one, so a stop never warns that it is missing."""

_WORD_START = r"(?i)(?<![a-z])"
_JSON_STRING = r'"((?:[^"\\]|\\.)*)"'
"""A JSON string's content, as it appears in a tool message (compact JSON)."""


def demo_script() -> Script:
    """The demo model's script."""
    return Script(
        description="choir's built-in demo model: scripted, not a real LLM",
        steps=[
            # first: the summary request quotes the whole session, which matches anything below
            ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
            ReplyStep(
                after="tool",
                match="proposal submitted",
                repeat=True,
                text=(
                    "I proposed a tool (demo.greet). Nothing is installed until you decide: "
                    "approve or reject it in choir tui (tab 6, Approvals) or with "
                    "`choirctl approval list` and `choirctl approval approve <id>`. Approved, "
                    "it waits on a branch for a human to write it (`choirctl approval show "
                    "<id>` says how), then `choirctl tool register` installs it."
                ),
            ),
            # memory: what the tools answered ('remember', 'recall' below)
            ReplyStep(
                after="tool",
                match_regex='^\\{"status":"error","summary":' + _JSON_STRING,
                templated=True,
                repeat=True,
                text="The tool answered with an error: {1}",
            ),
            ReplyStep(
                after="tool",
                match_regex=r'^\{"status":"success","summary":"stored knowledge',
                repeat=True,
                text=(
                    "Stored in my knowledge base, which outlives this session: restart me "
                    "(`choirctl agent restart agent-1`) and ask 'recall <a word of it>'."
                ),
            ),
            ReplyStep(
                after="tool",
                match_regex='"hits":\\[\\{"text":' + _JSON_STRING,
                templated=True,
                repeat=True,
                text="From my memory: {1}",
            ),
            ReplyStep(
                after="tool",
                match='"hits":[]',
                repeat=True,
                text="I found nothing like that in my memory. Say 'remember <something>' first.",
            ),
            ReplyStep(
                after="tool",
                repeat=True,
                text=(
                    f"That was a real tool call: choir ran {DEMO_TOOL} in your agent and sent me "
                    "its result. A real model would read it and decide what to do next; I only "
                    f"follow a script. {SETUP}"
                ),
            ),
            ReplyStep(
                match_regex=_WORD_START + r"(help|setup|set up|configure|config|real model|"
                r"openrouter|api key)",
                repeat=True,
                text=f"{INTRO} {SETUP}",
            ),
            ToolCallsStep(
                match_regex=_WORD_START + r"remember(?: that)?[:,]?\s+(.+)",
                templated=True,
                repeat=True,
                text="Storing that in my knowledge base.",
                calls=[
                    ScriptedCall(
                        name=MEMORY_WRITE,
                        arguments={"op": "add", "text": "{1}", "tags": ["demo"]},
                    )
                ],
            ),
            ToolCallsStep(
                match_regex=_WORD_START + r"recall[:,]?\s+(.+)",
                templated=True,
                repeat=True,
                text="Searching my knowledge base.",
                calls=[
                    ScriptedCall(
                        name=MEMORY_READ,
                        arguments={"store": "knowledge", "mode": "hybrid", "query": "{1}"},
                    )
                ],
            ),
            ToolCallsStep(
                match_regex=_WORD_START + r"(propos|approv)",
                repeat=True,
                text="Watch: I'm proposing a tool for you to approve.",
                calls=[ScriptedCall(name="choir.propose.tool", arguments=PROPOSAL)],
            ),
            ToolCallsStep(
                match_regex=_WORD_START + r"(demo|tool)",
                repeat=True,
                text=f"Watch: I'm calling the {DEMO_TOOL} tool.",
                calls=[ScriptedCall(name=DEMO_TOOL, arguments={"include_finished": False})],
            ),
            ReplyStep(
                match_regex=_WORD_START + r"(hi|hello|hey|howdy|greetings|good (morning|"
                r"afternoon|evening))(?![a-z])",
                repeat=True,
                text=f"Hello! {INTRO} {MENU}",
            ),
            ReplyStep(repeat=True, text=f"{INTRO} {MENU}"),
        ],
    )
