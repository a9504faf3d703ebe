"""The pieces of the docker confinement, one by one (pure, or on real files and sockets).

Agent uids (`agent_users`), egress rules (`egress_rules`), the kernel's mount table
(`mountinfo`), the host-side checks (`security_host`), the workspace hand-over and socket scan
(`workspace_guard`), the home's private directories, and socket names (`sockfile`).
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from choir.config import ChoirConfig
from choir.config.container import AGENT_UID_SPAN, ContainerConfig
from choir.config.scaffolding.skeleton import skeleton_config
from choir.core.security.agent_users import agent_uids
from choir.core.security.egress_rules import (
    EgressPolicy,
    chain_rules,
    link_rule,
    listed_rules,
    restore_script,
)
from choir.core.security.host import (
    EgressView,
    HostView,
    MountSource,
    SocketScan,
    WorkspaceView,
    check_host,
)
from choir.core.security.mountinfo import is_self_bind, mount_at, parse_mountinfo
from choir.core.security.profile import ContainerLimits, SecurityProfile
from choir.daemon.runtimes import workspace_guard
from choir.daemon.runtimes.container_spec import agent_user
from choir.daemon.runtimes.workspace_guard import hand_over, scan_sockets
from choir.errors import ConfigError
from choir.home import ChoirHome
from choir.transport.uds import sockfile

# -- agent uids ------------------------------------------------------------------------------


def test_agent_uids_are_distinct_in_range_and_stable_as_agents_come() -> None:
    ids = [f"agent-{n}" for n in range(200)]
    uids = agent_uids(ids, 2_000_000_000, AGENT_UID_SPAN)
    assert len(set(uids.values())) == 200
    assert all(2_000_000_000 <= uid < 2_000_000_000 + AGENT_UID_SPAN for uid in uids.values())
    assert agent_uids(ids[:5], 2_000_000_000, AGENT_UID_SPAN) == {i: uids[i] for i in ids[:5]}


def test_agent_uids_colliding_in_a_small_span_are_probed_apart() -> None:
    uids = agent_uids(["a", "b", "c", "d"], 5000, 4)
    assert sorted(uids.values()) == [5000, 5001, 5002, 5003]
    with pytest.raises(ValueError, match="do not fit"):
        agent_uids(["a", "b", "c", "d", "e"], 5000, 4)


def skeleton(tmp_path: Path, **container: Any) -> ChoirConfig:
    home = ChoirHome(tmp_path / "h")
    data = skeleton_config(home, tmp_path / "g", tmp_path / "a")
    data["container"] = container
    return ChoirConfig.model_validate(data)


def test_a_root_choird_never_gives_an_agent_a_host_users_uid(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("agents get uids of their own only under a root choird")
    config = skeleton(tmp_path)
    (agent_id,) = config.agents
    uid, gid = agent_user(config, agent_id)
    assert uid == gid >= 2_000_000_000
    slot = uid - 2_000_000_000
    clash = skeleton(tmp_path, agent_uid_base=65534 - slot)  # nobody's uid
    with pytest.raises(ConfigError, match="is the host user nobody's"):
        agent_user(clash, agent_id)


@pytest.mark.parametrize("base", [0, 999, 2**31 - 1])
def test_config_refuses_an_agent_uid_range_that_could_reach_root_or_overflow(base: int) -> None:
    with pytest.raises(ValueError, match="agent_uid_base"):
        ContainerConfig.model_validate({"agent_uid_base": base})


# -- egress rules ----------------------------------------------------------------------------

REJECT = ("-j", "REJECT", "--reject-with", "icmp-admin-prohibited")
ESTABLISHED = ("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "RETURN")


@pytest.mark.parametrize(
    ("host", "metadata", "network", "incoming", "forwarded"),
    [
        (
            False,
            False,
            "choir",
            [ESTABLISHED, ("-j", "CHOIR-LINK-choir"), ("-d", "169.254.0.0/16", *REJECT), REJECT],
            [("-d", "169.254.0.0/16", *REJECT), ("-m", "conntrack", "--ctstate", "DNAT", *REJECT)],
        ),
        (
            False,
            True,
            "choir-metadata",
            [
                ESTABLISHED,
                ("-j", "CHOIR-LINK-choir-metadata"),
                ("-d", "169.254.0.0/16", "-j", "RETURN"),
                REJECT,
            ],
            [("-m", "conntrack", "--ctstate", "DNAT", *REJECT)],
        ),
        (
            True,
            False,
            "choir-host",
            [ESTABLISHED, ("-d", "169.254.0.0/16", *REJECT)],
            [("-d", "169.254.0.0/16", *REJECT)],
        ),
        (True, True, "choir-open", [ESTABLISHED, ("-d", "169.254.0.0/16", "-j", "RETURN")], []),
    ],
)
def test_each_policy_has_its_own_network_and_rules(
    host: bool,
    metadata: bool,
    network: str,
    incoming: list[tuple[str, ...]],
    forwarded: list[tuple[str, ...]],
) -> None:
    policy = EgressPolicy(host, metadata)
    assert policy.network() == network
    assert len(network) <= 15  # it is also the bridge interface's name
    assert chain_rules(policy) == {
        f"CHOIR-IN-{network}": incoming,
        f"CHOIR-FWD-{network}": forwarded,
    }


def test_the_restore_script_replaces_exactly_our_chains_and_reads_back() -> None:
    policy = EgressPolicy()
    script = restore_script(policy)
    lines = script.splitlines()
    assert (lines[0], lines[-1]) == ("*filter", "COMMIT")
    assert lines[1:3] == [":CHOIR-IN-choir - [0:0]", ":CHOIR-FWD-choir - [0:0]"]
    assert all(line.startswith("-A CHOIR-") for line in lines[3:-1])
    listing = "-N CHOIR-IN-choir\n" + "\n".join(
        line for line in lines if line.startswith("-A CHOIR-IN-choir ")
    )
    assert listed_rules("CHOIR-IN-choir", listing) == chain_rules(policy)["CHOIR-IN-choir"]


def test_the_link_hole_is_one_address_one_port_tcp_and_never_in_the_restore() -> None:
    """The restore replaces CHOIR-IN/FWD whole: were the link chain named there, one home's
    start would drop another home's listener hole (two choirds, two ports, one network)."""
    assert link_rule("172.30.0.1", 9400) == (
        *("-d", "172.30.0.1/32", "-p", "tcp", "-m", "tcp", "--dport", "9400", "-j", "ACCEPT"),
    )
    assert ":CHOIR-LINK" not in restore_script(EgressPolicy())


# -- mountinfo -------------------------------------------------------------------------------


def test_mountinfo_parses_options_escapes_and_the_last_mount_wins() -> None:
    text = (
        "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
        "40 22 254:0 /srv/my\\040ws /srv/my\\040ws rw,relatime - ext4 /dev/vda rw\n"
        "41 40 254:0 /srv/my\\040ws /srv/my\\040ws rw,nosuid,nodev - ext4 /dev/vda rw\n"
        "garbage\n"
    )
    mounts = parse_mountinfo(text)
    assert [m.mount_id for m in mounts] == [22, 40, 41]
    top = mount_at(mounts, "/srv/my ws")
    assert top is not None
    assert (top.mount_id, top.fs_type, top.root) == (41, "ext4", "/srv/my ws")
    assert {"nosuid", "nodev"} <= top.options
    assert mount_at(mounts, "/srv") is None


def test_a_self_bind_is_told_from_a_bind_of_elsewhere() -> None:
    mounts = parse_mountinfo(
        "22 1 254:0 / / rw - ext4 /dev/vda rw\n"
        "30 22 254:0 /srv/ws /srv/ws rw,nosuid,nodev - ext4 /dev/vda rw\n"
        "31 22 254:0 /data /srv/other rw,nosuid,nodev - ext4 /dev/vda rw\n"
        "32 22 0:40 / /mnt rw - tmpfs tmpfs rw\n"
        "33 32 0:40 /a /mnt/a rw,nosuid,nodev - tmpfs tmpfs rw\n"
        "34 22 0:41 /srv/x /srv/x rw,nosuid,nodev - tmpfs tmpfs rw\n"
    )
    by_id = {m.mount_id: m for m in mounts}
    assert [is_self_bind(by_id[i], mounts) for i in (30, 31, 33, 34)] == [
        True,
        False,
        True,
        False,
    ]


# -- host-side checks ------------------------------------------------------------------------

HOME = "/home/op/.choir.d"
PROFILE = SecurityProfile(ContainerLimits(1, 1 << 30, 64), "2000000007:2000000007")
CLEAN = SocketScan((), 12, complete=True)
FILTERED = EgressView("choir", "blocks host addresses and link-local", True, True, "rules in place")


def view(*mounts: MountSource, egress: EgressView = FILTERED, mode: int = 0o700) -> HostView:
    workspace = WorkspaceView(f"{HOME}/workspaces/default", mode, 2000000007, 2000000007)
    return HostView(HOME, f"{HOME}/socks", "/run", workspace, mounts, egress)


def outcome(host: HostView, network: str = "choir") -> dict[str, tuple[bool, bool, str]]:
    inspect = {"HostConfig": {"NetworkMode": network}}
    return {c.item: (c.ok, c.required, c.actual) for c in check_host(PROFILE, inspect, host)}


def test_a_private_workspace_on_the_filtered_network_passes() -> None:
    found = outcome(view(MountSource("/w", f"{HOME}/workspaces/default", CLEAN)))
    assert {item: ok for item, (ok, _, _) in found.items()} == {
        "workspace_private": True,
        "no_socket_exposed": True,
        "egress_filtered": True,
    }


@pytest.mark.parametrize(
    ("resolved", "why"),
    [
        (HOME, "contains $CHOIR_HOME"),
        ("/home/op", "contains $CHOIR_HOME"),
        ("/", "contains $CHOIR_HOME"),
        (f"{HOME}/socks", "exposes $CHOIR_HOME/socks"),
        (f"{HOME}/socks/agents", "exposes $CHOIR_HOME/socks"),
        ("/run", "exposes the Docker socket's directory"),
        ("/run/docker", "exposes the Docker socket's directory"),
    ],
)
def test_a_mount_around_a_control_socket_fails(resolved: str, why: str) -> None:
    ok, required, actual = outcome(view(MountSource("/w", resolved, CLEAN)))["no_socket_exposed"]
    assert (ok, required) == (False, True)
    assert f"{resolved} {why}" in actual


def test_a_socket_found_inside_fails_and_a_partial_scan_says_so() -> None:
    found = SocketScan((f"{HOME}/workspaces/default/x.sock",), 3, complete=True)
    ok, _, actual = outcome(view(MountSource("/w", "/srv/w", found)))["no_socket_exposed"]
    assert not ok
    assert actual == f"socket {HOME}/workspaces/default/x.sock"
    partial = SocketScan((), 50_000, complete=False)
    ok, _, actual = outcome(view(MountSource("/w", "/srv/w", partial)))["no_socket_exposed"]
    assert ok
    assert "scanned only /w (first 50000 entries)" in actual


@pytest.mark.parametrize("mode", [0o750, 0o701, 0o755])
def test_a_workspace_others_can_enter_fails(mode: int) -> None:
    ok, _, actual = outcome(view(mode=mode))["workspace_private"]
    assert not ok
    assert actual.endswith(f"mode {mode:04o}")


def test_egress_that_choird_cannot_filter_is_an_advisory_failure() -> None:
    unfiltered = EgressView("choir", "blocks host addresses", False, False, "choird is not root")
    assert outcome(view(egress=unfiltered))["egress_filtered"] == (
        False,
        False,
        "not filtered: choird is not root",
    )
    missing = EgressView("choir", "blocks host addresses", True, False, "rules missing: x")
    assert outcome(view(egress=missing))["egress_filtered"][:2] == (False, True)
    assert outcome(view(), network="bridge")["egress_filtered"][:2] == (False, True)


# -- the workspace hand-over and socket scan (real files) ------------------------------------

AGENT = 2_000_000_123


@pytest.fixture
def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")


@pytest.mark.usefixtures("_root")
def test_hand_over_gives_the_tree_to_the_agent_and_never_reaches_outside(tmp_path: Path) -> None:
    outside = tmp_path / "host-secret"
    outside.write_text("x")
    linked = tmp_path / "host-file"
    linked.write_text("y")
    ws = tmp_path / "ws"
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "f").write_text("z")
    (ws / "link").symlink_to(outside)
    (ws / "dirlink").symlink_to(tmp_path)
    os.link(linked, ws / "hard")
    os.mkfifo(ws / "fifo")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(ws / "s.sock"))
        done = hand_over(ws, AGENT, AGENT)
        for path in (ws, ws / "a", ws / "a" / "b", ws / "a" / "b" / "f"):
            assert (path.stat().st_uid, path.stat().st_gid) == (AGENT, AGENT)
        assert os.lstat(ws / "link").st_uid == AGENT
        assert outside.stat().st_uid == 0  # through a symlink: never
        assert tmp_path.stat().st_uid == 0
        assert linked.stat().st_uid == 0  # a file with a second name elsewhere: left alone
        assert sorted(done.linked) == ["hard"]
        assert sorted(done.special) == ["fifo", "s.sock"]
        assert os.lstat(ws / "s.sock").st_uid == 0
        assert hand_over(ws, AGENT, AGENT).changed == 0  # nothing left to do


@pytest.mark.usefixtures("_root")
def test_hand_over_stops_at_its_depth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace_guard, "MAX_DEPTH", 3)
    deep = tmp_path / "ws" / "1" / "2" / "3" / "4"
    deep.mkdir(parents=True)
    done = hand_over(tmp_path / "ws", AGENT, AGENT)
    assert (tmp_path / "ws" / "1" / "2" / "3").stat().st_uid == AGENT
    assert deep.stat().st_uid == 0
    assert done.too_deep == 1


def test_scan_finds_sockets_but_the_agents_own_and_stops_at_its_bound(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    for n in range(5):
        (tmp_path / "d" / f"f{n}").write_text("")
    with socket.socket(socket.AF_UNIX) as host, socket.socket(socket.AF_UNIX) as own:
        host.bind(str(tmp_path / "d" / "host.sock"))
        own.bind(str(tmp_path / "own.sock"))
        mine = os.getuid()
        scan = scan_sockets(str(tmp_path), skip_uid=None)
        assert sorted(scan.found) == sorted(
            [str(tmp_path / "d" / "host.sock"), str(tmp_path / "own.sock")]
        )
        assert scan.complete
        assert scan_sockets(str(tmp_path), skip_uid=mine).found == ()
        assert scan_sockets(str(tmp_path / "own.sock"), skip_uid=None).found == (
            str(tmp_path / "own.sock"),
        )
        partial = scan_sockets(str(tmp_path), skip_uid=None, limit=3)
        assert (partial.complete, partial.scanned) == (False, 3)


# -- the home's private directories ----------------------------------------------------------


def test_an_older_home_has_its_private_directories_narrowed_never_widened(tmp_path: Path) -> None:
    home = ChoirHome(tmp_path / "h")
    home.create_directories()
    assert stat.S_IMODE(home.workspaces.stat().st_mode) == 0o700
    home.workspaces.chmod(0o755)  # as an older choir made it
    home.logs.chmod(0o750)
    home.root.chmod(0o700)  # the operator's choice: kept
    home.create_directories()
    assert stat.S_IMODE(home.workspaces.stat().st_mode) == 0o700
    assert stat.S_IMODE(home.logs.stat().st_mode) == 0o700
    assert stat.S_IMODE(home.root.stat().st_mode) == 0o700


# -- socket names ----------------------------------------------------------------------------


def test_a_socket_is_bound_under_a_name_that_says_nothing_of_the_host(tmp_path: Path) -> None:
    path = tmp_path / "socks" / "agent.sock"
    server, temporary = sockfile.bind_private(path, "test")
    with server:
        server.listen(1)
        sockfile.publish(temporary, path)
        name = server.getsockname()
        assert name.startswith("/proc/self/fd/")
        assert str(tmp_path) not in name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))
            accepted, _ = server.accept()
            with accepted:
                assert accepted.getsockname() == name


# -- how `agent verify` and `agent status` show an advisory item -----------------------------


def test_an_advisory_failure_is_a_warning_not_a_failure() -> None:
    from choir.ctl.agent.verify import report_lines, verified_label
    from choir.protocol.operator.views import VerifyReport

    checks = [
        {"item": "user_not_root", "ok": True, "required": True, "expected": "x", "actual": "y"},
        {"item": "egress_filtered", "ok": False, "required": False, "expected": "f", "actual": "n"},
    ]
    data = {
        "agent_id": "agent-1",
        "runtime": "docker",
        "container": "0123456789abcdef",
        "checked_at": "T",
        "ok": True,
        "checks": checks,
    }
    lines = report_lines(VerifyReport.model_validate(data))
    assert lines[0].endswith("matches the security profile (warning: egress_filtered)")
    assert lines[2].startswith("  warn  egress_filtered")
    assert verified_label(VerifyReport.model_validate(data)) == (
        "matches the profile (checked T, warning: egress_filtered)"
    )
    checks[0]["ok"] = False
    failing = VerifyReport.model_validate(data)
    assert report_lines(failing)[0].endswith("FAILS user_not_root (warning: egress_filtered)")
