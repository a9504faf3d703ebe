"""choird and choir-agent import only what their start needs (issue 13: start-up time and RSS).

Each probe runs in a fresh interpreter and lists the heavy modules the entry point pulled in.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.processes import run_probe

REPO_ROOT = Path(__file__).resolve().parents[1]


def loaded(imports: str, candidates: tuple[str, ...]) -> list[str]:
    probe = f"import sys\n{imports}\nprint([m for m in {candidates!r} if m in sys.modules])\n"
    found: list[str] = run_probe(probe)
    return found


def test_choir_agent_skips_the_setup_commands_logic() -> None:
    imports = "import choir.agent.choir_agent, choir.agent.app, choir.agent.startup"
    setup = ("choir.config.scaffolding", "choir.config.validation", "choir.config.load")
    assert loaded(imports, setup) == []


def test_choir_agent_starts_without_an_http_client() -> None:
    """No HTTP client library at start (the LLM client's is h11 over asyncio streams, at its
    first call); httpx is only choird's HTTP transport's."""
    imports = "import choir.agent.choir_agent, choir.agent.app, choir.agent.startup"
    assert loaded(imports, ("aiohttp", "httpx")) == []


def test_choir_agent_serves_without_aiohttp() -> None:
    """aiohttp (~0.13 s of CPU, ~14 MB) is not the LLM client's HTTP: what the agent imports to
    serve loads none; an integration call (web search) or a proxied model endpoint loads it."""
    imports = "import choir.agent.app as a\na.import_after_hello()"
    assert loaded(imports, ("aiohttp",)) == []


@pytest.mark.parametrize(
    "heavy",
    [
        "docker",  # the Docker SDK: the process runtime and agent.build's first use load it
        "aiohttp",  # the agents' HTTP listener: --transport http only
        "cryptography",  # TLS certificates: --transport http only
        "prometheus_client",  # the metrics endpoint: config.json `metrics.listen` only
        "choir.daemon.telemetry",
        # operator verbs load at their first call (`operator.api.Route`)
        "choir.daemon.operator.agents.lifecycle",
        "choir.daemon.operator.agents.update",
        "choir.daemon.operator.memory.knowledge",
        "choir.daemon.operator.approvals.config_change",  # an approved config change's
        "choir.daemon.operator.recovery.inbox",  # the restart notice's, 6 s after the start
        "choir.daemon.memory.sealed_backfill",  # a start with a memory key's
        "choir.daemon.workers.browser.chromium",  # `browser.enabled` only (`browser.off`)
        "playwright",
    ],
)
def test_choird_on_the_process_runtime_skips(heavy: str) -> None:
    imports = (
        "import importlib, choir.daemon.choird, choir.daemon.app as app\n"
        "for m in app.AFTER_DATABASE: importlib.import_module(m)"
    )
    assert loaded(imports, (heavy,)) == []


def test_choir_agent_skips_the_command_line_tool_of_httpx() -> None:
    """`import httpx` would load its CLI (click, rich, pygments: ~70 ms); `choir` blocks it."""
    imports = "import choir.agent.app, choir.adapters.llm.client, httpx"
    assert loaded(imports, ("click", "rich", "pygments")) == []


def test_choir_agent_serves_without_the_config_sections_it_never_reads() -> None:
    """The LLM client and the spend meter read `models` and `spend_cap` (`choir.config.llm`);
    the models of the other sections (`choir.config.resources`: TTS, voice, email, Notion,
    gateways…: ~8 ms), an integration the agent may never call (web search, with `html`) and
    what only a skill naming an unknown tool needs (`difflib`) are not loaded to serve."""
    imports = "import choir.agent.app as a\na.import_after_hello()"
    unread = ("choir.config.resources", "choir.agent.integrations.web_search", "html", "difflib")
    assert loaded(imports, unread) == []


def test_choir_agent_commits_without_building_the_event_union() -> None:
    """A commit dumps the event with its own serializer: building `EVENT_ADAPTER` (every event
    model's schema) cost the first commit, on the first reply's path, ~10 ms of CPU."""
    probe = (
        "import choir.agent.app as a\n"
        "a.import_after_hello()\n"
        "from choir.agent.kernel.commitlog import CommitLog\n"
        "from choir.protocol.log.events import EVENT_ADAPTER, UserMsg\n"
        "entry = CommitLog().commit('edge', UserMsg(text='hello'))\n"
        "assert entry.event == {'kind': 'user_msg', 'text': 'hello', 'attachments': [],"
        " 'message_id': None}, entry.event\n"
        "print(repr(type(EVENT_ADAPTER.serializer).__name__))"
    )
    assert run_probe(probe) == "MockValSer"


def test_choir_agent_builds_no_event_validator_at_import() -> None:
    """One `EVENT_ADAPTER`, built on first use: each `TypeAdapter(Event)` built at import cost
    choir-agent's start ~50 ms."""
    probe = (
        "import sys, choir.agent.app\n"
        "from choir.protocol.log.events import EVENT_ADAPTER\n"
        "print(repr(type(EVENT_ADAPTER.validator).__name__))"
    )
    assert run_probe(probe) == "MockValSer"


@pytest.mark.parametrize(
    "heavy",
    [
        "choir.adapters.llm.client",  # the LLM client (its aiohttp loads at the first call)
        "choir.agent.lanes.edge",  # the lanes
        "choir.agent.kernel.registry",  # the tool registry and the kernel
        "choir.agent.wiring",
        "jsonschema",  # the tools' schemas are checked once the registry loads
        "pydantic",  # INIT_HELLO goes out as plain JSON; its answer is parsed after
        "choir.protocol.wire.payloads",  # the wire models (~90 classes)
        "choir.protocol.log.events",
        "choir.agent.replication.policy",  # the heartbeat's rules (the start's backoff is not)
        "choir.agent.kernel.commitlog",
        "random",  # the start's backoff jitter: loaded once choird is away, not before the hello
    ],
)
def test_choir_agent_says_init_hello_before_loading(heavy: str, tmp_path: Path) -> None:
    """What choir-agent imports to reach INIT_HELLO, version.json at hand (an image, or the
    process runtime's merged tree), leaves out pydantic and the wire models, the lanes, the LLM
    stack and the kernel (`choir.agent.app.AFTER_HELLO`): choird hears from a new agent at about
    a third of its start-up CPU; the rest loads once INIT_HELLO is sent."""
    version = {
        "agent_id": "a",
        "image_version": "process",
        "global_repo_commit": "g",
        "agent_repo_commit": "a",
        "tool_manifest_hash": "0" * 64,
        "skill_manifest_hash": "1" * 64,
    }
    (tmp_path / "version.json").write_text(json.dumps(version))
    imports = (
        "import choir.agent.choir_agent, choir.agent.app, choir.agent.startup\n"
        "from choir.agent.startup import AgentOptions, hello_payload\n"
        "from pathlib import Path\n"
        "env = {'CHOIR_AGENT_ID': 'a', 'CHOIR_SESSION_ID': 's', 'CHOIR_LEASE_TOKEN': 't'}\n"
        f"hello_payload(AgentOptions.from_env('/x.sock', root=Path({str(tmp_path)!r}), "
        "workspace=Path('.'), environ=env))"
    )
    assert loaded(imports, (heavy,)) == []


def test_what_loads_after_init_hello_is_what_serving_imports() -> None:
    """Every module `ChoirAgent` imports inside its methods is in `AFTER_HELLO` (or imported
    before INIT_HELLO), so nothing loads on the main thread while the agent serves."""
    from choir.agent import app

    tree = ast.parse(Path(app.__file__).read_text())
    inside: set[str] = set()
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.module:
                    inside.add(node.module)
    probe = "import sys, choir.agent.app as a\na.import_after_hello()\nprint(sorted(sys.modules))"
    assert inside - set(run_probe(probe)) == set()


@pytest.mark.parametrize(
    ("entry", "argv"),
    [
        ("choir.daemon.choird", "['--home', '/nonexistent/choir-home']"),
        ("choir.agent.choir_agent", "None"),  # no CHOIR_AGENT_ID: a usage error
    ],
)
def test_entry_points_skip_pydantics_plugin_scan(entry: str, argv: str) -> None:
    """pydantic scans every installed distribution's entry points for plugins when it builds
    its first model (30-45 ms of a start), after importing importlib.metadata (10-25 ms);
    choird and choir-agent use no plugin and skip both (`choir.pydantic_plugins`)."""
    probe = (
        f"import sys, {entry} as entry\n"
        f"sys.argv = ['x']\n"
        f"try:\n    entry.main({argv}) if {argv!r} != 'None' else entry.main()\n"
        "except SystemExit:\n    pass\n"
        "from choir.protocol import Ack\n"
        "Ack.model_validate({})\n"
        "from pydantic.plugin import _loader\n"
        "print(repr((list(_loader.get_plugins()), 'importlib.metadata' in sys.modules)))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env.pop("CHOIR_AGENT_ID", None)
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, env=env
    )
    assert done.stdout.strip().splitlines()[-1] == "([], False)", done.stderr


def test_the_console_paints_before_loading_the_wire_models() -> None:
    """`choir tui`'s first paint (bench.tui_stream, goal ≤ 600 ms) does not wait on pydantic and
    the session event models (~0.2 s of CPU): they load with choird's first answer. The event
    text imported them for one pure formatter."""
    assert loaded("import tui.app", ("pydantic", "choir.protocol.log.events")) == []
