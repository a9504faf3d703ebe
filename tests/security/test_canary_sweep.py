"""A canary sweep: no secret value reaches any place it must not, on either runtime.

An operator sets every secret config can name to a unique canary (`choirctl secret set`, from
stdin): the model's API key, agent-1's git token, Notion, Brave, email, ElevenLabs, a Telegram
bot token and the external Postgres password. `choir up` starts choird in the background and
agent-1 — in Docker (on the `allow_host_access` network, to reach the model server on this
host), or on the process runtime in its bwrap sandbox — on a scripted model (OpenAI-compatible,
on this machine) that makes it run tools: `choir.exec` printing its
environment, every environment and command line it can read under /proc, its HOME and git's
config, and `git credential fill`; `choir.fs.write` and `choir.fs.read`. Then the operator
chats, stops the agent (session summary), starts it, restarts it, rotates the Brave key
(`secret apply`), kills the agent (a crash) and starts it again (the session resumes), chats
once more, reads everything back through choirctl and the console, and runs `choir down`.

Every canary (and the rotated Brave key) is then searched for, raw and encoded, in: every file
under `$CHOIR_HOME` but secrets.json (logs and their gzip archives, repos, runtime trees,
workspace, tls…), a `pg_dump` of the database and what its server logged meanwhile, every
request body the model server received, `docker inspect` of the agent's containers and image,
every `/proc/*/environ` and `/proc/*/cmdline` of this host (twice, while the agent runs), the
output of choirctl's reading commands and an SVG screenshot of each of the console's tabs. The
only places allowed to hold a secret are secrets.json and the agent's memory. The model's key
must have reached the model server in the `Authorization` header — the one place it is for.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import docker
import docker.errors
import pytest

from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.scripted.demo import SUMMARY, SUMMARY_REQUEST
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.target import ConnectParams
from tests.docker_support import require_docker
from tests.harness.processes import BIN, environment
from tests.runtime.conftest import BUILD_TIMEOUT_S
from tests.security.canaries import Sweep, canary
from tests.security.process_agents import require_bwrap

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * BUILD_TIMEOUT_S)]

SNOOP = (
    "env; echo ---; "
    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/environ; tr '\\0' ' ' < $p/cmdline; echo; "
    "done 2>/dev/null; echo ---; "
    'ls -la "$HOME"; cat "$HOME"/.gitconfig "$HOME"/.git-credentials 2>&1; git config -l; '
    "echo ---; printf 'protocol=https\\nhost=github.com\\n\\n' | git credential fill 2>&1; "
    "echo snooped"
)
"""What a prompt-injected agent would try first to find a secret (each result is committed,
stored, shown and sent to the model: the sweep checks all of those)."""

SCRIPT = Script(
    description="an agent looking for secrets with its tools",
    steps=[
        ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
        ToolCallsStep(
            match="look around",
            repeat=True,
            calls=[
                ScriptedCall(name="choir.exec", arguments={"command": SNOOP}),
                ScriptedCall(
                    name="choir.fs.write",
                    arguments={"path": "notes/found.txt", "content": "nothing to see\n"},
                ),
            ],
        ),
        ToolCallsStep(
            after="tool",
            match="snooped",
            repeat=True,
            calls=[ScriptedCall(name="choir.fs.read", arguments={"path": "notes/found.txt"})],
        ),
        ReplyStep(after="tool", repeat=True, text="I looked around."),
        ReplyStep(repeat=True, text="Hello again."),
    ],
)

SECRET_NAMES = (
    "model-key",
    "git-token",
    "notion-key",
    "brave-key",
    "email-creds",
    "tts-key",
    "telegram-token",
    "pg-password",
)
UNUSED = "http://127.0.0.1:9/v1"
"""Where the services the agent never calls here live (nothing listens on port 9)."""


def configure(home: ChoirHome, model_url: str, pg: ConnectParams, runtime: str) -> None:
    """config.json edited as an operator would: a keyed model, every kind of secret."""
    data: dict[str, Any] = json.loads(home.config_file.read_text())
    data["models"]["canary"] = {
        "provider": "openrouter", "model": "canary/model", "endpoint": model_url,
        "secret": "model-key",
    }  # fmt: skip
    data["git_identities"]["agent-1"]["secret"] = "git-token"
    data["notion_integrations"] = {"wiki": {"secret": "notion-key"}}
    data["search"] = {"brave": {"secret": "brave-key", "endpoint": UNUSED}}
    data["email_accounts"] = {
        "mail": {"smtp_host": "127.0.0.1", "imap_host": "127.0.0.1", "secret": "email-creds"}
    }
    data["tts"] = {"eleven": {"model_id": "m", "endpoint": UNUSED, "secret": "tts-key"}}
    data["voice_profiles"] = {"voice": {"tts": "eleven", "voice_id": "v"}}
    data["gateways"]["bot"] = {"type": "telegram", "secret": "telegram-token", "base_url": UNUSED}
    data["postgres"] = {
        "host": pg.host, "port": pg.port, "database": pg.database, "user": pg.user,
        "secret": "pg-password",
    }  # fmt: skip
    defaults = data["agents"]["agent-1"]["defaults"]
    defaults.update(llm="canary", notion="wiki", email="mail", voice_profile="voice")
    data["log_archive_threshold_lines"] = 10  # choird's log is archived (gzip) during the run
    if runtime == "docker":
        # the model server listens on this host's address on the agents' network
        data["container"] = {"allow_host_access": True}
    home.config_file.write_text(json.dumps(data, indent=2) + "\n")


def test_the_sweep_finds_a_canary_in_every_form_a_tool_prints_it() -> None:
    value = canary("token")
    basic = base64.b64encode(f"x-access-token:{value}".encode()).decode()
    places = {
        "raw": f"token={value}",
        "url": f"https://x:{quote(value, safe='')}@example.com/repo.git",
        "form": f"a=1&token={quote_plus(value)}",
        "basic": f"Authorization: Basic {basic}",
        "urlsafe": base64.urlsafe_b64encode(f"ab{value}".encode()).decode(),
        "json": json.dumps({"nested": [{"v": value}]}),
    }
    sweep = Sweep({"token": value}, {k: v.encode() for k, v in places.items()})
    assert {leak.place for leak in sweep.leaks()} == set(places)
    clean = Sweep({"token": value}, {"other": canary("token").encode()})
    assert clean.leaks() == []


# -- running choir's commands ------------------------------------------------------------------


def run(home: ChoirHome, program: str, *args: str, stdin: str | None = None) -> str:
    """`program args` as the operator runs it; its output (it must succeed)."""
    env = environment(CHOIR_HOME=str(home.root), COLUMNS="200")
    if cache := os.environ.get("CHOIR_BUILD_CACHE"):
        env["CHOIR_BUILD_CACHE"] = cache  # the session's wheel cache (tests/conftest.py)
    done = subprocess.run(
        [str(BIN / program), *args],
        env=env,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{program} {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def choirctl(home: ChoirHome, *args: str) -> str:
    return run(home, "choirctl", *args)


def agent_status(home: ChoirHome) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(choirctl(home, "agent", "status", "agent-1", "--json"))
    return status


def wait_for_state(home: ChoirHome, state: str, within: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while (status := agent_status(home))["state"] != state:
        assert time.monotonic() < deadline, f"agent-1 is {status['state']}, not {state}"
        time.sleep(0.3)
    return status


def crash(home: ChoirHome, runtime: str, engine: docker.DockerClient | None) -> None:
    """kill -9 of the agent: its container, or its process."""
    status = agent_status(home)
    if runtime == "docker":
        assert engine is not None
        engine.containers.get(status["container"]).kill()
    else:
        os.kill(int(status["pid"]), signal.SIGKILL)
    wait_for_state(home, "crashed")


# -- the places --------------------------------------------------------------------------------


def sweep_docker(sweep: Sweep, engine: docker.DockerClient, home: ChoirHome, when: str) -> int:
    """`docker inspect` and `docker logs` of every container choird made for `home`, and
    `docker inspect` of their images."""
    found = engine.containers.list(all=True, filters={"label": f"choir.home={home.root}"})
    for container in found:
        sweep.add_json(f"docker inspect {container.name} ({when})", container.attrs)
        with contextlib.suppress(docker.errors.NotFound):  # what the engine kept of its output
            sweep.add(f"docker logs {container.name} ({when})", container.logs())
        image = engine.images.get(container.attrs["Image"])
        sweep.add_json(f"docker image inspect {container.attrs['Config']['Image']}", image.attrs)
    return len(found)


def pg_dump(params: ConnectParams) -> str:
    """The whole database as SQL (pgserver ships pg_dump beside the server)."""
    from pgserver._commands import POSTGRES_BIN_PATH

    done = subprocess.run(
        [
            str(POSTGRES_BIN_PATH / "pg_dump"), "--host", params.host, "--port", str(params.port),
            "--username", params.user, "--no-password", params.database,
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "choir_control" in done.stdout
    return done.stdout


READ_BACK: tuple[tuple[str, ...], ...] = (
    ("status",),
    ("status", "--json"),
    ("agent", "list", "--json"),
    ("agent", "status", "agent-1"),
    ("agent", "status", "agent-1", "--json"),
    ("agent", "verify", "agent-1", "--json"),
    ("session", "list", "--json"),
    ("approval", "list", "--all", "--json"),
    ("workspace", "list", "--json"),
    ("model", "get", "agent-1", "--json"),
    ("config", "show", "--json"),
    ("secret", "list", "--json"),
    ("logs", "choird", "--no-follow"),
    ("logs", "agent-1", "--no-follow"),
)
"""What the operator reads back with choirctl (plus every session's events and cores)."""


def sweep_choirctl(sweep: Sweep, home: ChoirHome) -> None:
    for read in READ_BACK:
        sweep.add(f"choirctl {' '.join(read)}", run_lenient(home, *read))
    sessions = json.loads(choirctl(home, "session", "list", "--json"))["sessions"]
    assert len(sessions) >= 2  # the first, and the one started after the stop
    for session in sessions:
        sid = session["session_id"]
        reads = (
            ("session", "events", sid, "--limit", "1000"),
            ("session", "events", sid, "--limit", "1000", "--full", "--json"),
            ("session", "cores", sid, "--json"),
        )
        for args in reads:
            sweep.add(f"choirctl {' '.join(args)}", choirctl(home, *args))


def run_lenient(home: ChoirHome, *args: str) -> str:
    """A reading command's output whatever it exits with (`agent verify` exits 1 on a warning
    it cannot pass here, e.g. no firewall)."""
    done = subprocess.run(
        [str(BIN / "choirctl"), *args],
        env=environment(CHOIR_HOME=str(home.root), COLUMNS="200"),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout + done.stderr


async def sweep_console(sweep: Sweep, home: ChoirHome) -> None:
    """An SVG screenshot of each of the console's tabs, agent-1 selected."""
    from tests.tui.pilot import console, show_tab, until
    from tui.views import VIEWS

    async with console(home) as (app, pilot):
        await until(pilot, lambda: app.state.selected_agent == "agent-1", what="agent-1")
        for view in VIEWS:
            await show_tab(pilot, view.view_id)
            await pilot.pause(0.5)
            sweep.add(f"console tab {view.view_id}", app.export_screenshot())


# -- the run -----------------------------------------------------------------------------------


async def model_address(runtime: str) -> str:
    """Where the agent can reach a server on this host: loopback for a process, the host's
    address on the agents' network for a container."""
    if runtime != "docker":
        return "127.0.0.1"
    from choir.adapters.docker.containers import ContainerEngine
    from choir.adapters.docker.engine import DockerEngine
    from choir.core.security.egress_rules import EgressPolicy
    from choir.daemon.runtimes.egress import NETWORK_LABELS

    engine = ContainerEngine(await DockerEngine.connect())
    try:
        network = EgressPolicy(host_access=True, metadata=False).network()
        info = await engine.ensure_network(network, NETWORK_LABELS)
    finally:
        engine.close()
    assert info.gateway is not None
    return info.gateway


@pytest.mark.parametrize("runtime", ["docker", "process"])
async def test_no_secret_reaches_any_place_it_must_not(
    root: Path, pg_params: ConnectParams, pg_server: EmbeddedPostgres, runtime: str
) -> None:
    engine = None
    if runtime == "docker":
        require_docker()
        engine = docker.from_env()
    else:
        require_bwrap()
    canaries = {name: canary(name) for name in SECRET_NAMES}
    rotated = canary("brave-key-rotated")
    sweep = Sweep({**canaries, "brave-key (rotated)": rotated})
    home = ChoirHome(root / "h")
    pg_log_start = pg_server.log_file.stat().st_size
    async with ScriptedModelServer(SCRIPT, host=await model_address(runtime)) as model:
        await asyncio.to_thread(
            scenario, home, model.url, pg_params, runtime, engine, canaries, rotated, sweep
        )
        try:
            await sweep_console(sweep, home)
            await asyncio.to_thread(sweep_choirctl, sweep, home)
        finally:
            down = await asyncio.to_thread(run, home, "choir", "down")
        assert "choird and its Postgres exited" in down or "down:" in down, down
    if engine is not None:
        assert sweep_docker(sweep, engine, home, "after down") == 0
        engine.close()

    assert sweep.add_tree(home.root, skip=frozenset({home.secrets_file})) > 20
    assert any(place.endswith(".log.gz") for place in sweep.places)  # archives were read
    sweep.add("pg_dump", pg_dump(pg_params))
    with pg_server.log_file.open("rb") as log:
        log.seek(pg_log_start)
        sweep.add("the Postgres server's log", log.read())
    for n, request in enumerate(model.requests):
        sweep.add(f"model request {n} body ({request.path})", json.dumps(request.body))

    leaks = sweep.leaks()
    assert not leaks, "secrets found where they must not be:\n" + "\n".join(map(str, leaks))
    keyed = {r.headers.get("Authorization") for r in model.requests}
    assert keyed == {f"Bearer {canaries['model-key']}"}  # the key did its job, and only there
    assert any("[REDACTED]" in json.dumps(r.body) for r in model.requests)  # the token was read
    # the allowed place holds them: the search finds what is there
    held = Sweep(sweep.canaries, {"secrets.json": home.secrets_file.read_bytes()})
    assert {leak.secret for leak in held.leaks()} == set(sweep.canaries) - {"brave-key"}


def scenario(
    home: ChoirHome,
    model_url: str,
    pg: ConnectParams,
    runtime: str,
    engine: docker.DockerClient | None,
    canaries: dict[str, str],
    rotated: str,
    sweep: Sweep,
) -> None:
    """Set up, run and crash agent-1 as an operator would (blocking: run in a thread); what
    each command printed goes into `sweep`."""

    def said(program: str, *args: str, stdin: str | None = None) -> str:
        output = run(home, program, *args, stdin=stdin)
        sweep.add(f"{program} {' '.join(args)}", output)
        return output

    said("choirctl", "init")
    configure(home, model_url, pg, runtime)
    for name, value in canaries.items():
        said("choirctl", "secret", "set", name, stdin=value + "\n")
    said("choirctl", "config", "check")

    up = said("choir", "up", "--no-tui", "--runtime", runtime)
    assert f"{runtime} runtime" in up, up
    assert "I looked around." in said("choirctl", "chat", "agent-1", "please look around")
    sweep.add_processes("agent running")
    if engine is not None:
        assert sweep_docker(sweep, engine, home, "first start") == 1

    said("choirctl", "agent", "stop", "agent-1")
    said("choirctl", "agent", "start", "agent-1", "--dm", "console")
    said("choirctl", "agent", "restart", "agent-1")
    said("choirctl", "secret", "set", "brave-key", stdin=rotated + "\n")
    said("choirctl", "secret", "apply")
    assert "I looked around." in said("choirctl", "chat", "agent-1", "look around again")

    crash(home, runtime, engine)
    said("choirctl", "agent", "start", "agent-1", "--dm", "console")  # resumes the session
    assert "Hello again." in said("choirctl", "chat", "agent-1", "hello")
    sweep.add_processes("after the resume")
    if engine is not None:
        assert sweep_docker(sweep, engine, home, "after the resume") >= 1
