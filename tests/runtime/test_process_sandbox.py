"""The process runtime's bwrap sandbox: what an agent in it is, sees and survives.

A real choird starts the real choir-agent in bwrap. The test reads the kernel's view of that
process itself (`/proc/<pid>/…`, as root) rather than trusting choird's check, then compares
with what `agent verify`, `agent status` and `agent list` say. Also: choird killed with SIGKILL
does not kill its sandboxed agent (the sandbox is not tied to choird's life); a bwrap that
cannot run makes the runtime fall back to unsandboxed, saying why; the agent's git works in
there (its identity, its credential helper); and the pure check fails each item it should, from
kernel views that lack it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from choir.client import ChoirClient
from choir.core.security.profile import REPO_TARGET
from choir.core.security.sandbox import (
    HostFiles,
    Mount,
    SandboxLayout,
    SandboxView,
    bwrap_args,
    check_sandbox,
    parse_mountinfo,
)
from choir.daemon.app import ChoirDaemon
from choir.daemon.runtimes.bwrap import BWRAP_ENV
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.harness.chat import reply_to
from tests.harness.daemons import poll_until, running_daemon
from tests.harness.homes import read_config
from tests.harness.processes import run_choirctl, spawn_choird, wait_until_ready
from tests.security.process_agents import exec_script, process_agent, require_bwrap

pytestmark = pytest.mark.slow

ITEMS = [
    "namespaces",
    "no_new_privileges",
    "capabilities_dropped",
    "setuid_filter",
    "workspace_bind",
    "writable_paths",
    "nosuid_mounts",
    "host_paths_hidden",
]


@pytest.fixture
async def sandboxed(
    home: ChoirHome, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    require_bwrap()
    monkeypatch.delenv(BWRAP_ENV, raising=False)
    async with (
        running_daemon(home, runtime="process") as daemon,
        await ChoirClient.connect(home) as client,
    ):
        yield daemon, client


def status_of(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines)}


def confined(pid: int, home: ChoirHome, workspace: Path) -> None:
    """The kernel's view of the agent, read by the test itself: every item holds."""
    root = Path(f"/proc/{pid}/root")
    status = status_of(pid)
    assert (status["NoNewPrivs"], status["Seccomp"]) == ("1", "2")
    assert int(status["CapEff"], 16) == int(status["CapBnd"], 16) == 0
    for name in ("user", "pid", "ipc", "uts", "mnt"):
        assert os.readlink(f"/proc/{pid}/ns/{name}") != os.readlink(f"/proc/self/ns/{name}"), name
    assert os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")

    writable = {
        m.point for m in parse_mountinfo(Path(f"/proc/{pid}/mountinfo").read_text()) if m.writable
    }
    assert {p for p in writable if not p.startswith(("/dev", "/proc"))} == {"/workspace", "/tmp"}
    assert (root / "workspace").stat().st_ino == workspace.stat().st_ino
    assert (root / "choir" / "version.json").is_file()
    assert (root / str(home.agent_socket("agent-1")).lstrip("/")).is_socket()
    for hidden in (
        home.secrets_file,
        home.root / "config.json",
        home.operator_socket,
        Path("/etc/shadow"),
        Path.home() / ".bash_history",
        Path("/var/run"),
    ):
        assert not os.path.lexists(f"{root}{hidden}"), hidden
    environ = dict(
        v.split("=", 1) for v in Path(f"/proc/{pid}/environ").read_text().split("\0") if v
    )
    assert set(environ) - {"PWD"} == {
        "PATH",
        "HOME",
        "LANG",
        "CHOIR_AGENT_ID",
        "CHOIR_SESSION_ID",
    } | {
        "CHOIR_AGENT_REPO",  # /agent-repo, its own repo read-only, and which branch
        "CHOIR_AGENT_REF",
    }
    assert environ.get("PWD", "/workspace") == "/workspace"  # bwrap's --chdir sets it
    assert environ["HOME"] == "/tmp/home"  # on the sandbox's own tmpfs, not the host's


async def test_a_sandboxed_agent_is_confined_and_every_view_says_so(
    sandboxed: tuple[ChoirDaemon, ChoirClient],
) -> None:
    daemon, client = sandboxed
    started = await client.agent_start("agent-1", {"dm": "console"})
    assert (started.runtime, started.sandboxed) == ("process", True)
    pid = started.pid
    assert "choir-agent" in " ".join(psutil.Process(pid).cmdline())
    assert os.getpgid(pid) == pid  # it leads its group: what choird signals to end an orphan
    workspace = Path(read_config(daemon.home)["workspaces"]["default"]["path"])

    await asyncio.to_thread(confined, pid, daemon.home, workspace)

    verified = await client.call("agent.verify", agent_id="agent-1")
    assert verified["ok"] is True, verified
    assert [check["item"] for check in verified["checks"]] == ITEMS
    shown = await asyncio.to_thread(run_choirctl, daemon.home, "agent", "verify", "agent-1")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.startswith("agent-1 (process (bwrap), checked ")
    assert "  pass  setuid_filter" in shown.stdout

    status_shown = await asyncio.to_thread(run_choirctl, daemon.home, "agent", "status", "agent-1")
    assert f"runtime    process (bwrap), pid {pid}" in status_shown.stdout
    assert "security   matches the profile (checked " in status_shown.stdout
    listed = await asyncio.to_thread(run_choirctl, daemon.home, "agent", "list")
    assert "process (bwrap)" in listed.stdout
    await client.agent_stop("agent-1")
    await poll_until(lambda: not psutil.pid_exists(pid), within=5)


async def test_a_choird_killed_with_sigkill_does_not_take_its_sandboxed_agent_with_it(
    home: ChoirHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox is not tied to choird (no `--die-with-parent`): the agent outlives choird
    until it decides for itself — today it gives up when choird's socket refuses it (an agent
    that rides out a choird restart keeps running); it is never killed with choird."""
    require_bwrap()
    choird = spawn_choird(home, "--runtime", "process", "--quiet")
    agent: psutil.Process | None = None
    sandbox_init: psutil.Process | None = None
    try:
        await asyncio.to_thread(wait_until_ready, choird)
        started = await asyncio.to_thread(
            run_choirctl, home, "agent", "start", "agent-1", "--dm", "console", "--json"
        )
        assert started.returncode == 0, started.stdout + started.stderr
        data = json.loads(started.stdout)
        assert data["sandboxed"] is True
        agent = psutil.Process(data["pid"])
        sandbox_init = agent.parent()
        choird.process.send_signal(signal.SIGKILL)
        choird.process.wait()
        await asyncio.sleep(1.0)
        if not agent.is_running():
            log = await asyncio.to_thread(home.agent_log("agent-1").read_text)
            assert "cannot connect to socket" in log, log[-2000:]
    finally:
        if choird.process.poll() is None:
            choird.process.kill()
            choird.process.wait()
        if agent is not None and agent.is_running():
            agent.kill()
            agent.wait(5)
    assert sandbox_init is not None
    sandbox_init.wait(5)  # bwrap's init, and so its PID namespace, ended with the agent


async def test_a_bwrap_that_cannot_run_falls_back_to_unsandboxed_and_says_why(
    home: ChoirHome, root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = root / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(BWRAP_ENV, str(fake))
    async with running_daemon(home, runtime="process") as daemon:
        assert daemon.runtime is not None
        assert (daemon.runtime.name, daemon.runtime.sandboxed) == ("process", False)
    warned = [r for r in caplog.records if "agents run unsandboxed" in r.getMessage()]
    assert warned, [r.getMessage() for r in caplog.records]
    assert "No permissions to create new namespace" in warned[0].fields["reason"]  # type: ignore[attr-defined]


def view(**changes: object) -> SandboxView:
    """A kernel view that passes every item, with `changes` applied."""
    good: dict[str, object] = {
        "status": {"NoNewPrivs": "1", "Seccomp": "2", "CapEff": "0", "CapPrm": "0", "CapBnd": "0"},
        "namespaces": dict.fromkeys(("user", "pid", "ipc", "uts", "mnt"), True) | {"net": False},
        "mounts": [
            Mount("/", frozenset({"ro", "nosuid", "nodev"}), "tmpfs"),
            Mount("/workspace", frozenset({"rw", "nosuid", "nodev"}), "ext4"),
            Mount("/tmp", frozenset({"rw", "nosuid", "nodev"}), "tmpfs"),
            Mount("/dev/null", frozenset({"rw", "nosuid"}), "devtmpfs"),
            Mount("/usr", frozenset({"ro", "nosuid", "nodev"}), "ext4"),
        ],
        "workspace_is_bound": True,
        "visible": (),
    }
    return SandboxView(**(good | changes))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "failed"),
    [
        ({}, []),
        ({"namespaces": {"user": True, "pid": True, "ipc": True, "uts": True}}, ["namespaces"]),
        (
            {
                "status": {
                    "NoNewPrivs": "0",
                    "Seccomp": "2",
                    "CapEff": "0",
                    "CapPrm": "0",
                    "CapBnd": "0",
                }
            },
            ["no_new_privileges"],
        ),
        (
            {
                "status": {
                    "NoNewPrivs": "1",
                    "Seccomp": "0",
                    "CapEff": "0",
                    "CapPrm": "0",
                    "CapBnd": "000001ffffffffff",
                }
            },
            ["capabilities_dropped", "setuid_filter"],
        ),
        ({"workspace_is_bound": False}, ["workspace_bind"]),
        (
            {
                "mounts": [
                    Mount("/home", frozenset({"rw", "nosuid"}), "ext4"),
                    Mount("/tmp/x", frozenset({"rw", "nosuid"}), "ext4"),
                ]
            },
            ["workspace_bind", "writable_paths"],
        ),
        ({"mounts": [Mount("/workspace", frozenset({"rw"}), "ext4")]}, ["nosuid_mounts"]),
        ({"visible": ["/h/secrets.json"]}, ["host_paths_hidden"]),
        (  # the agent's repo bound writable
            {
                "mounts": [
                    Mount("/workspace", frozenset({"rw", "nosuid", "nodev"}), "ext4"),
                    Mount("/agent-repo", frozenset({"rw", "nosuid", "nodev"}), "ext4"),
                ]
            },
            ["writable_paths"],
        ),
    ],
)
def test_the_check_fails_each_item_a_view_lacks(
    changes: dict[str, object], failed: list[str]
) -> None:
    checks = check_sandbox(view(**changes))
    assert [c.item for c in checks] == ITEMS
    assert [c.item for c in checks if not c.ok] == failed


def test_the_agents_repo_is_bound_read_only_at_agent_repo_only_when_given() -> None:
    layout = SandboxLayout(HostFiles(()), "/srv/ws", "/h/runtime/a/choir", "/h/socks/a/s", "a")
    assert REPO_TARGET not in bwrap_args(layout)
    args = bwrap_args(dataclasses.replace(layout, repo="/h/sources/agents/a"))
    at = args.index(REPO_TARGET)
    assert args[at - 2 : at + 1] == ["--ro-bind", "/h/sources/agents/a", REPO_TARGET]
    assert args.index("--remount-ro") > at


def test_mountinfo_lines_are_read_with_their_per_mount_options() -> None:
    text = (
        "67 43 0:40 /newroot / ro,nosuid,nodev,relatime - tmpfs tmpfs rw\n"
        "87 67 254:0 /srv/my\\040ws /workspace rw,nosuid,nodev,relatime - ext4 /dev/vda rw\n"
    )
    assert parse_mountinfo(text) == [
        Mount("/", frozenset({"ro", "nosuid", "nodev", "relatime"}), "tmpfs"),
        Mount("/workspace", frozenset({"rw", "nosuid", "nodev", "relatime"}), "ext4"),
    ]


async def test_the_agents_git_in_the_sandbox_commits_as_its_identity_and_gets_its_token(
    root: Path, pg_params: ConnectParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = (
        "{ git config --global user.email; "
        "printf 'protocol=https\\nhost=github.com\\npath=o/r.git\\n\\n' | git credential fill "
        "| grep -c '^password=.'; echo end; } > git.txt 2>&1; echo git-done"
    )
    script = exec_script(command, done="git-done")
    async with process_agent(
        root, pg_params, script, sandbox="bwrap", monkeypatch=monkeypatch
    ) as agent:
        await agent.start_worker()
        answer = agent.workspace / "git.txt"
        await poll_until(lambda: answer.exists() and answer.read_text().endswith("end\n"), 30)
        assert answer.read_text() == "agent-1@choir.local\n1\nend\n"
        await agent.client.agent_stop("agent-1")


AGENT_UID = 2_000_019_628
"""A uid the docker runtime hands workspaces to: no user of this host, unmapped in the sandbox."""


async def test_a_workspace_a_container_agent_owned_is_taken_back_for_the_sandbox(
    root: Path, pg_params: ConnectParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator who ran agent-1 on docker and then starts it on the process runtime: before,
    the sandbox exited at once (`bwrap: Can't chdir to /workspace: Permission denied`)."""
    if os.geteuid() != 0:
        pytest.skip("only a root choird hands workspaces over")
    write = ScriptedCall(
        name="choir.fs.write",
        arguments={"path": "notes/answer.txt", "op": "append", "content": "from the sandbox\n"},
    )
    script = Script(
        steps=[
            ToolCallsStep(match="write", calls=[write]),
            ReplyStep(after="tool", text="written"),
        ]
    )

    def left_by_a_container(home: ChoirHome) -> None:
        workspace = Path(read_config(home)["workspaces"]["default"]["path"])
        (workspace / "notes").mkdir(parents=True)
        (workspace / "notes" / "answer.txt").write_text("from the container\n")
        for path in (workspace, workspace / "notes", workspace / "notes" / "answer.txt"):
            os.chown(path, AGENT_UID, AGENT_UID)
            path.chmod(0o700 if path.is_dir() else 0o600)

    async with process_agent(
        root,
        pg_params,
        script,
        sandbox="bwrap",
        monkeypatch=monkeypatch,
        configure=left_by_a_container,
    ) as agent:
        assert agent.started.sandboxed is True
        answer = await reply_to(agent.client, "write")
        assert answer["text"] == "written"
        notes = agent.workspace / "notes" / "answer.txt"
        assert notes.read_text() == "from the container\nfrom the sandbox\n"
        assert {p.stat().st_uid for p in (agent.workspace, notes.parent, notes)} == {0}
        log = agent.home.choird_log.read_text()
        assert "workspace handed back to choird's uid" in log
        await agent.client.agent_stop("agent-1")
