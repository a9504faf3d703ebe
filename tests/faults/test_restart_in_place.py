"""`choir restart`: choird re-executes itself in place, its agents kept running (issue 12's
graceful twin of the kill -9 in `test_choird_restart.py`).

choird runs as a real process on the test session's Postgres (and on an embedded one), agent-1
on the process runtime — and on docker, over its socket and over HTTPS —, a scripted model
behind it. `choir restart` keeps choird's pid (the same process: its parent never sees it
exit), adopts the agent — same process or container, same session, no new one —, sees it
reconnect (its first call to the new image), puts a choird-level change that `config apply`
left pending into effect, and the agent answers after. An agent that hangs or dies across the
restart is named with where to look, and the exit code is 1. A restart while the agent is
between two tool calls loses nothing acknowledged and runs no call twice (`InvariantChecker`).
A choird that cannot re-execute itself (its program file removed under it), or whose config
would not load, refuses before it stops anything (`choir restart` and `choirctl choird restart`
alike). Before the change there was no such verb: `choir restart` was a usage error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
from pathlib import Path

import psutil
import pytest

from choir.scripted import ScriptedModelServer
from choir.store.postgres.postmaster import postmaster_pid
from choir.store.postgres.target import ConnectParams
from tests.docker_support import require_docker
from tests.faults.invariants import InvariantChecker
from tests.faults.scene import (
    GENEROUS,
    SCRIPT,
    START,
    Scene,
    home_for,
    kinds_stored,
    process_scene,
    run,
    script,  # noqa: F401 — the fixture
    start_choird,
    start_work,
)
from tests.faults.support import (
    IN_CONTAINER_PORT,
    as_json,
    assert_chain,
    ready_since,
    serve_model_in,
    spawn_choird,
    teardown,
)
from tests.harness.homes import make_home, read_config, write_config
from tests.harness.mail import free_port
from tests.harness.processes import BIN, Choird, environment, run_choir
from tests.harness.waits import poll_until, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


async def test_choir_restart_keeps_choird_its_agent_and_session_and_applies_choird_config(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    async with process_scene(root, pg_params, model.url) as scene:
        await start_choird(scene)
        assert scene.choird is not None
        choird_pid = scene.choird.process.pid
        started = as_json(await run(scene, *START))
        assert (await run(scene, "chat", "agent-1", "hello")).returncode == 0
        data = read_config(scene.home)
        data.setdefault("rpc", {})["read_timeout_ms"] = 45_000  # read once, at choird's start
        write_config(scene.home, data)
        assert (await run(scene, "config", "load")).returncode == 0
        applied = await run(scene, "config", "apply")
        assert "rpc.read_timeout_ms" in applied.stdout
        assert "choir restart" in applied.stdout, applied.stdout  # the command that applies it

        done = await asyncio.to_thread(run_choir, scene.home, "restart")

        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert "choird    restarting (agents keep running: 1)" in lines, lines
        assert any(
            line.startswith("choird    ready in ") and line.endswith(f"(pid {choird_pid})")
            for line in lines
        ), lines
        back = f"agent-1   reconnected: session {started['session_id']}, pid {started['pid']}"
        assert f"{back} (unix socket)" in lines, lines  # its first call to the new image
        assert scene.choird.process.poll() is None  # the same process, never exited
        held = [f.path for f in psutil.Process(choird_pid).open_files()]
        assert held.count(str(scene.home.root / "choird.lock")) == 1  # the old one closed
        log = scene.home.choird_log.read_text()
        assert "choird stopped: re-executing itself" in log
        assert log.count("choird ready") == 2
        status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        assert (status["state"], status["session_id"], status["pid"]) == (
            "running",
            started["session_id"],
            started["pid"],
        )
        sessions = as_json(await run(scene, "session", "list", "agent-1", "--json"))["sessions"]
        assert [s["session_id"] for s in sessions] == [started["session_id"]]  # no new session
        shown = as_json(await run(scene, "config", "show", "--json"))
        assert shown["pending"] == []
        assert shown["config"]["rpc"]["read_timeout_ms"] == 45_000  # now in effect
        hello = await run(scene, "chat", "agent-1", "hello")
        assert hello.returncode == 0, hello.stderr
        assert "hello back" in hello.stdout

        down = await asyncio.to_thread(run_choir, scene.home, "down")
        assert down.returncode == 0, down.stdout + down.stderr
        # still choird's child: its exit code is known, unlike one a killed choird left
        line = f"agent-1   stopped: session {started['session_id']} stopped"
        assert line in down.stdout.splitlines(), down.stdout
        assert scene.choird.process.wait(timeout=30) == 0


async def test_a_restart_between_two_tool_calls_loses_nothing_and_runs_no_call_twice(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    """The model takes 3 s between its two reads (`scene.SCRIPT`); choird restarts then."""
    async with process_scene(root, pg_params, model.url) as scene:
        await start_choird(scene)
        assert scene.choird is not None
        started = as_json(await run(scene, *START))
        session_id = started["session_id"]
        assert (await run(scene, "chat", "agent-1", "hello")).returncode == 0
        work = await start_work(scene)  # the job; its choirctl loses choird

        async def first_read_stored() -> bool:
            return "tool_result_committed" in await kinds_stored(scene, session_id)

        await poll_until(first_read_stored, within=30, every=0.2)
        checker = InvariantChecker(scene.params, ["agent-1"])
        await checker.observe()
        restart = asyncio.create_task(asyncio.to_thread(run_choir, scene.home, "restart"))
        checker.fault("choir restart")

        async def adopted() -> bool:
            status = await run(scene, "agent", "status", "agent-1", "--json")
            return status.returncode == 0 and as_json(status)["state"] == "running"

        await checker.healthy(adopted)
        done = await restart
        assert done.returncode == 0, done.stdout + done.stderr
        await asyncio.wait_for(work.wait(), 60)

        async def replied() -> bool:
            return "done reading" in [
                r.payload.get("text")
                for r in await asyncio.to_thread(scene.events, session_id)
                if r.event_type == "agent_replied"
            ]

        await poll_until(replied, within=60, every=0.2)
        verdict = await checker.verify()  # chain, acknowledged events kept, calls once
        assert verdict.open_intents == []
        records = await asyncio.to_thread(scene.events, session_id)
        assert_chain(records)
        results = [r.payload for r in records if r.event_type == "tool_result_committed"]
        assert len(results) == 2, results  # each read once
        assert all(result["result"]["status"] == "success" for result in results), results
        status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        assert (status["session_id"], status["pid"]) == (session_id, started["pid"])
        assert scene.choird.process.poll() is None


async def test_an_agent_that_does_not_reconnect_is_named_with_where_to_look_and_exit_1(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    """agent-1 hangs (SIGSTOP): alive, so the new image adopts it, but it never calls it;
    agent-2 is killed right after the restart was asked for (the old image's stop held 3 s by
    a failpoint): not adopted. Each has a warning line naming it and where to look, the exit
    code is 1 and `--json` says which came back. agent-1, let run on, reconnects and answers.
    Before the change both were "adopted"/"not adopted" lines and the exit code was 0."""
    home = home_for(  # no lease runs out while agent-1 hangs: only reconnection is in question
        root, pg_params, model.url, heartbeat_interval_ms=1000, crash_detection_threshold_ms=300_000
    )
    scene = Scene(home, root, pg_params, "process")
    hung: psutil.Process | None = None
    try:
        await start_choird(scene, CHOIR_FAILPOINTS="choird.before_stop_agents=sleep(3000)")
        first = as_json(await run(scene, *START))
        (root / "ws-other").mkdir(exist_ok=True)
        second = as_json(await run(scene, "agent", "start", "agent-2", "--dm", "ops", "--json"))
        assert (await run(scene, "chat", "agent-1", "hello")).returncode == 0
        hung = psutil.Process(first["pid"])
        hung.suspend()
        restart = asyncio.create_task(asyncio.to_thread(run_choir, home, "restart", "--json"))
        await poll_until(
            lambda: "choird restarting: agents keep running" in home.choird_log.read_text(),
            within=30,
            every=0.05,
        )
        psutil.Process(second["pid"]).kill()

        done = await restart

        assert done.returncode == 1, done.stdout + done.stderr
        lines = done.stderr.splitlines()
        look = "choirctl agent status {0}, choirctl logs {0}"
        assert (
            "agent-1   warning: adopted but never reconnected (not within 30 s): see "
            + look.format("agent-1")
        ) in lines, lines
        assert (
            "agent-2   warning: not adopted (it is crashed now): see " + look.format("agent-2")
        ) in lines, lines
        agents = {a["agent_id"]: a for a in json.loads(done.stdout)["agents"]}
        assert {k: agents["agent-1"][k] for k in ("adopted", "reconnected", "link", "state")} == {
            "adopted": True,
            "reconnected": False,
            "link": None,
            "state": "running",
        }
        assert (agents["agent-2"]["adopted"], agents["agent-2"]["reconnected"]) == (False, False)

        hung.resume()  # the operator's next step found it hung

        async def reconnected() -> bool:
            status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
            return status["link"] == "unix socket"

        await poll_until(reconnected, within=30, every=0.2)
        hello = await run(scene, "chat", "agent-1", "hello")
        assert hello.returncode == 0, hello.stderr
        assert "hello back" in hello.stdout
    finally:
        if hung is not None:
            with contextlib.suppress(psutil.Error):
                hung.resume()
        await asyncio.to_thread(teardown, home, scene.choird)


async def test_a_restart_that_cannot_exec_or_would_not_start_is_refused_with_nothing_stopped(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    async with process_scene(root, pg_params, model.url) as scene:
        program = root / "gone" / "choird"  # a choird whose program is removed under it
        program.parent.mkdir()
        shutil.copy2(BIN / "choird", program)
        scene.choird = await asyncio.to_thread(_spawn_from, scene, program)
        started = as_json(await run(scene, *START))
        program.unlink()

        refused = await asyncio.to_thread(run_choir, scene.home, "restart", "--json")

        assert refused.returncode == 6, refused.stdout + refused.stderr
        assert refused.stdout == ""
        assert f"its program {program} is gone" in refused.stderr
        assert "nothing was stopped" in refused.stderr
        await _still_serving(scene, started)

        program.parent.rmdir()
        first, scene.choird = scene.choird, None  # the next one runs from the virtualenv
        await asyncio.to_thread(teardown, scene.home, first)
        await start_choird(scene)
        started = as_json(await run(scene, *START))
        good = scene.home.config_file.read_text()
        scene.home.config_file.write_text(good.replace('"models"', '"modelz"', 1))

        refused = await run(scene, "choird", "restart")  # choirctl's twin of choir restart

        assert refused.returncode == 2, refused.stdout + refused.stderr  # invalid_request
        assert "choird not restarted, nothing stopped" in refused.stderr
        assert "modelz" in refused.stderr  # every problem listed
        scene.home.config_file.write_text(good)
        await _still_serving(scene, started)


async def test_the_embedded_postgres_is_kept_and_adopted_across_a_restart(root: Path) -> None:
    home = make_home(root)  # the embedded server
    scene = Scene(home, root, ConnectParams("", 0, "", ""), "process")
    try:
        await start_choird(scene)
        assert scene.choird is not None
        postmaster = postmaster_pid(home.pgdata)
        assert postmaster is not None

        done = await asyncio.to_thread(run_choir, home, "restart", "--json")

        assert done.returncode == 0, done.stdout + done.stderr
        summary = as_json(done)
        assert (summary["choird_pid"], summary["agents"]) == (scene.choird.process.pid, [])
        assert postmaster_pid(home.pgdata) == postmaster  # kept, not stopped and started
        assert "choird    restarting (agents keep running: 0)" in done.stderr
        status = as_json(await run(scene, "status", "--json"))
        assert status["postgres"]["state"] == "ok"
        down = await asyncio.to_thread(run_choir, home, "down")
        assert down.returncode == 0, down.stdout + down.stderr
        assert postmaster_pid(home.pgdata) is None  # a stop still stops it
    finally:
        await asyncio.to_thread(teardown, home, scene.choird)


def _spawn_from(scene: Scene, program: Path) -> Choird:
    """`choird` run from `program` (a copy of the virtualenv's script), ready."""
    stderr = scene.root / "choird-copy.stderr"
    with stderr.open("wb") as sink:
        process = subprocess.Popen(
            [str(program), "--quiet", "--runtime", scene.runtime],
            env=environment(CHOIR_HOME=str(scene.home.root)),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            start_new_session=True,
        )
    choird = Choird(process, stderr, scene.home.choird_log)
    wait_for(lambda: ready_since(choird, 0), within=60, every=0.02)
    return choird


async def _still_serving(scene: Scene, started: dict[str, object]) -> None:
    """choird answers, the agent runs its session as before and answers a chat."""
    assert scene.choird is not None
    assert scene.choird.process.poll() is None
    status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
    assert (status["state"], status["session_id"], status["pid"]) == (
        "running",
        started["session_id"],
        started["pid"],
    )
    assert psutil.pid_exists(int(str(started["pid"])))
    hello = await run(scene, "chat", "agent-1", "hello")
    assert hello.returncode == 0, hello.stderr
    assert "hello back" in hello.stdout


async def test_agents_over_http_are_adopted_and_a_port_picked_at_start_refuses(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    """`--transport http`: the new image listens on the same port and the agent reconnects; a
    choird whose port the system picked (`--listen …:0`) would not get it back, so it refuses."""
    async with process_scene(root, pg_params, model.url) as scene:
        listen = f"127.0.0.1:{free_port()}"
        scene.choird = await asyncio.to_thread(
            spawn_choird,
            scene.home,
            "--runtime",
            "process",
            "--transport",
            "http",
            "--listen",
            listen,
        )
        started = as_json(await run(scene, *START))

        done = await asyncio.to_thread(run_choir, scene.home, "restart")

        assert done.returncode == 0, done.stdout + done.stderr
        back = f"agent-1   reconnected: session {started['session_id']}, pid {started['pid']}"
        assert f"{back} (http://{listen})" in done.stdout.splitlines(), done.stdout
        await _still_serving(scene, started)
        first, scene.choird = scene.choird, None
        await asyncio.to_thread(teardown, scene.home, first)
        scene.choird = await asyncio.to_thread(
            spawn_choird, scene.home, "--runtime", "process", "--transport", "http",
            "--listen", "127.0.0.1:0",
        )  # fmt: skip
        started = as_json(await run(scene, *START))

        refused = await asyncio.to_thread(run_choir, scene.home, "restart")

        assert refused.returncode == 6, refused.stdout + refused.stderr
        assert "a port the system picked at its start" in refused.stderr
        await _still_serving(scene, started)


@pytest.mark.parametrize("transport", ["socket", pytest.param("https", marks=pytest.mark.serial)])
async def test_a_docker_agent_is_adopted_and_reconnects_across_a_restart(
    root: Path, pg_params: ConnectParams, transport: str
) -> None:
    """The first scenario on docker: same choird pid, same container, same session, the agent
    reconnected — over its socket, or (`--transport http`, serial: the egress filter's hole is
    this host's) over HTTPS on its network's gateway, where the new image listens again on the
    same port — and a chat answers after."""
    require_docker()
    url = f"http://127.0.0.1:{IN_CONTAINER_PORT}/v1"  # the container's loopback
    home = home_for(root, pg_params, url, **GENEROUS)
    (Path(read_config(home)["workspaces"]["default"]["path"]) / ".script.json").write_text(
        SCRIPT.model_dump_json()
    )
    scene = Scene(home, root, pg_params, "docker")
    args = ["--runtime", "docker"]
    if transport == "https":
        args += ["--transport", "http", "--tls-self-signed", "--listen", f"127.0.0.1:{free_port()}"]
    try:
        scene.choird = await asyncio.to_thread(spawn_choird, home, *args)
        choird_pid = scene.choird.process.pid
        started = as_json(await run(scene, *START))
        before = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        container = before["container"]
        await asyncio.to_thread(serve_model_in, container)
        assert (await run(scene, "chat", "agent-1", "hello")).returncode == 0
        link = as_json(await run(scene, "agent", "status", "agent-1", "--json"))["link"]
        if transport == "https":
            assert link.startswith("https://"), link
            assert not link.startswith("https://127."), link  # the gateway, not the loopback
        else:
            assert link == "unix socket"

        done = await asyncio.to_thread(run_choir, home, "restart")

        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert any(
            line.startswith("choird    ready in ") and line.endswith(f"(pid {choird_pid})")
            for line in lines
        ), lines
        session_id = started["session_id"]
        back = f"agent-1   reconnected: session {session_id}, container {container[:12]} ({link})"
        assert back in lines, lines
        assert scene.choird.process.poll() is None  # the same process, never exited
        status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        assert (status["state"], status["session_id"], status["container"], status["link"]) == (
            "running",
            session_id,
            container,
            link,
        )
        sessions = as_json(await run(scene, "session", "list", "agent-1", "--json"))["sessions"]
        assert [s["session_id"] for s in sessions] == [session_id]  # no new session
        hello = await run(scene, "chat", "agent-1", "hello")
        assert hello.returncode == 0, hello.stderr
        assert "hello back" in hello.stdout
    finally:
        await asyncio.to_thread(teardown, home, scene.choird)
