"""The declared security profile and its check, item by item (pure; the real engine is in
test_docker_runtime.py).

A container as the engine reports it when created from `create_options` passes every item;
each tampering an operator (or a misbehaving engine) could introduce fails exactly its item.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from choir.config import ChoirConfig
from choir.config.container import ContainerConfig
from choir.core.security.profile import (
    REPO_TARGET,
    SOCKET_DIR_TARGET,
    WORKSPACE_TARGET,
    ContainerLimits,
    ProfileReport,
    SecurityProfile,
    check_container,
    create_options,
    nano_cpus,
    parse_proc_status,
    unsandboxed,
)
from choir.daemon.runtimes.container_spec import loopback_endpoint

WS, SOCK = "/srv/ws", "/home/op/.choir.d/socks/agents/a/choir.sock"
SOCK_DIR = "/home/op/.choir.d/socks/agents/a"
PROFILE = SecurityProfile(ContainerLimits(1.5, 1 << 30, 256), user="1000:1000")
PROC = {
    "CapEff": "0000000000000000",
    "CapBnd": "0000000000000000",
    "NoNewPrivs": "1",
    "Seccomp": "2",
    "Uid": "1000\t1000\t1000\t1000",
}
MOUNTINFO = (
    "560 540 0:52 / / ro,relatime master:1 - overlay overlay rw,lowerdir=/l\n"
    "571 560 254:0 /srv/ws /workspace rw,nosuid,nodev,relatime - ext4 /dev/vda rw\n"
    "572 560 0:5 /agents/a.sock /run/choir.sock rw,nosuid,noexec - tmpfs tmpfs rw\n"
)


def inspected() -> dict[str, Any]:
    """What `docker inspect` says of a container created from `create_options(PROFILE)`."""
    options = create_options(PROFILE, workspace=WS, socket=SOCK)
    return {
        "Config": {"User": options["user"]},
        "HostConfig": {
            "CapDrop": ["ALL"],
            "CapAdd": None,
            "SecurityOpt": ["no-new-privileges"],
            "ReadonlyRootfs": True,
            "Tmpfs": options["tmpfs"],
            "NanoCpus": options["nano_cpus"],
            "Memory": options["mem_limit"],
            "PidsLimit": options["pids_limit"],
            "Privileged": False,
            "PidMode": "",
            "NetworkMode": "bridge",
            "IpcMode": "private",
            "Devices": [],
            "DeviceRequests": None,
            "DeviceCgroupRules": None,
            "VolumesFrom": None,
        },
        "Mounts": [
            {"Type": "bind", "Source": WS, "Destination": WORKSPACE_TARGET, "RW": True},
            {"Type": "bind", "Source": SOCK_DIR, "Destination": SOCKET_DIR_TARGET, "RW": True},
        ],
    }


def failed(
    inspect: dict[str, Any],
    proc: dict[str, str] | None = None,
    mountinfo: str | None = MOUNTINFO,
    profile: SecurityProfile = PROFILE,
) -> list[str]:
    checks = check_container(
        profile, inspect, workspace=WS, socket=SOCK, proc_status=proc, mountinfo=mountinfo
    )
    return [check.item for check in checks if not check.ok]


def test_the_declared_profile_passes_every_item() -> None:
    checks = check_container(
        PROFILE, inspected(), workspace=WS, socket=SOCK, proc_status=PROC, mountinfo=MOUNTINFO
    )
    assert [c.item for c in checks] == [
        "cap_drop_all",
        "no_new_privileges",
        "read_only_rootfs",
        "tmpfs",
        "cpu_limit",
        "memory_limit",
        "pids_limit",
        "seccomp_default",
        "not_privileged",
        "no_docker_socket",
        "no_host_pid",
        "no_host_network",
        "no_host_ipc",
        "no_devices",
        "only_workspace_and_socket_mounted",
        "user",
        "user_not_root",
        "workspace_nosuid_nodev",
    ]
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]


def _host(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    def tamper(inspect: dict[str, Any]) -> None:
        inspect["HostConfig"][key] = value

    return tamper


def _mount(source: str, target: str, kind: str = "bind") -> Callable[[dict[str, Any]], None]:
    def tamper(inspect: dict[str, Any]) -> None:
        inspect["Mounts"].append(
            {"Type": kind, "Source": source, "Destination": target, "RW": True}
        )

    return tamper


def _read_only_workspace(inspect: dict[str, Any]) -> None:
    inspect["Mounts"][0]["RW"] = False


def _root_user(inspect: dict[str, Any]) -> None:
    inspect["Config"]["User"] = ""


def _uid_zero(inspect: dict[str, Any]) -> None:
    inspect["Config"]["User"] = "0:0"


TAMPERED: dict[str, list[Callable[[dict[str, Any]], None]]] = {
    "cap_drop_all": [_host("CapDrop", []), _host("CapAdd", ["NET_ADMIN"])],
    "no_new_privileges": [_host("SecurityOpt", [])],
    "read_only_rootfs": [_host("ReadonlyRootfs", False)],
    "tmpfs": [_host("Tmpfs", {"/tmp": "rw"}), _host("Tmpfs", {"/tmp": "rw", "/run": "rw,suid"})],
    "cpu_limit": [_host("NanoCpus", 0)],
    "memory_limit": [_host("Memory", 0)],
    "pids_limit": [_host("PidsLimit", None)],
    "seccomp_default": [
        _host("SecurityOpt", ["no-new-privileges", "seccomp=unconfined"]),
        _host("SecurityOpt", ["no-new-privileges", "seccomp=/etc/lax.json"]),
    ],
    "not_privileged": [_host("Privileged", True)],
    "no_docker_socket": [_mount("/var/run/docker.sock", "/var/run/docker.sock")],
    "no_host_pid": [_host("PidMode", "host")],
    "no_host_network": [_host("NetworkMode", "host"), _host("NetworkMode", "container:abc")],
    "no_host_ipc": [_host("IpcMode", "host")],
    "no_devices": [
        _host("Devices", [{"PathOnHost": "/dev/kvm", "PathInContainer": "/dev/kvm"}]),
        _host("DeviceRequests", [{"Driver": "nvidia", "Count": -1}]),
    ],
    "only_workspace_and_socket_mounted": [
        _mount("/etc", "/host-etc"),
        _mount("vol", "/data", "volume"),
        _read_only_workspace,
        _host("VolumesFrom", ["other"]),
    ],
    "user": [_root_user],
    "user_not_root": [_root_user, _uid_zero],
}


@pytest.mark.parametrize(
    ("item", "tamper"),
    [(item, tamper) for item, tampers in TAMPERED.items() for tamper in tampers],
)
def test_each_tampering_fails_its_item(item: str, tamper: Callable[[dict[str, Any]], None]) -> None:
    inspect = copy.deepcopy(inspected())
    tamper(inspect)
    found = failed(inspect)
    assert item in found
    # a docker.sock is a mount; a root user is also not the declared user
    assert set(found) <= {item, "only_workspace_and_socket_mounted", "user", "user_not_root"}


@pytest.mark.parametrize(
    ("field", "value", "item"),
    [
        ("CapEff", "00000000a80425fb", "cap_drop_all"),
        ("CapBnd", "00000000a80425fb", "cap_drop_all"),
        ("NoNewPrivs", "0", "no_new_privileges"),
        ("Seccomp", "0", "seccomp_default"),
        ("Uid", "1000\t0\t1000\t1000", "user_not_root"),
    ],
)
def test_the_kernels_view_must_agree(field: str, value: str, item: str) -> None:
    assert failed(inspected(), {**PROC, field: value}) == [item]


@pytest.mark.parametrize(
    "line",
    [
        "571 560 254:0 /srv/ws /workspace rw,relatime - ext4 /dev/vda rw",
        "571 560 254:0 /srv/ws /workspace rw,nosuid,relatime - ext4 /dev/vda rw",
        "571 560 254:0 /srv/ws /elsewhere rw,nosuid,nodev - ext4 /dev/vda rw",
    ],
)
def test_the_workspace_must_be_nosuid_nodev_in_the_containers_own_mount_table(line: str) -> None:
    assert failed(inspected(), PROC, line + "\n") == ["workspace_nosuid_nodev"]


def test_without_the_kernels_view_inspect_decides_but_nosuid_is_unknown() -> None:
    assert failed(inspected(), None, None) == ["workspace_nosuid_nodev"]


def test_a_choird_that_cannot_mount_reports_nosuid_as_advisory() -> None:
    profile = SecurityProfile(PROFILE.limits, PROFILE.user, mounts_enforced=False)
    checks = check_container(
        profile, inspected(), workspace=WS, socket=SOCK, proc_status=PROC, mountinfo=""
    )
    report = ProfileReport("agent-1", "docker", "2025-01-01T00:00:00+00:00", checks)
    (nosuid,) = [c for c in checks if c.item == "workspace_nosuid_nodev"]
    assert (nosuid.ok, nosuid.required) == (False, False)
    assert "choird is not root" in nosuid.actual
    assert report.ok
    assert report.failed == []
    assert report.warnings == ["workspace_nosuid_nodev"]
    assert report.as_dict()["checks"][-1]["required"] is False


def test_create_options_apply_the_limits_and_nothing_else_is_mounted() -> None:
    options = create_options(PROFILE, workspace=WS, socket=SOCK)
    assert options["nano_cpus"] == nano_cpus(1.5) == 1_500_000_000
    assert options["mem_limit"] == options["memswap_limit"] == 1 << 30
    assert options["pids_limit"] == 256
    assert options["cap_drop"] == ["ALL"]
    assert options["security_opt"] == ["no-new-privileges"]
    assert options["read_only"] is True
    assert options["privileged"] is False
    assert options["network_mode"] == "bridge"
    assert options["volumes"] == {
        WS: {"bind": "/workspace", "mode": "rw"},
        SOCK_DIR: {"bind": "/run/choir", "mode": "rw"},
    }
    assert sorted(options["tmpfs"]) == ["/run", "/tmp"]
    assert "uid=1000,gid=1000" in options["tmpfs"]["/run"]
    assert "devices" not in options
    assert "pid_mode" not in options


def test_the_process_runtime_reports_no_sandbox() -> None:
    report = unsandboxed("agent-1", "2025-01-01T00:00:00+00:00")
    assert not report.ok
    assert report.failed == ["sandbox"]
    assert "--runtime docker" in report.as_dict()["checks"][0]["actual"]


def test_proc_status_parses() -> None:
    assert parse_proc_status("Name:\tpython3\nSeccomp:\t2\nNoNewPrivs:\t1\n") == {
        "Name": "python3",
        "Seccomp": "2",
        "NoNewPrivs": "1",
    }


@pytest.mark.parametrize("network", ["host", "container:other"])
def test_config_refuses_a_shared_network_namespace(network: str) -> None:
    with pytest.raises(ValueError, match="must not share another network namespace"):
        ContainerConfig.model_validate({"network": network})


@pytest.mark.parametrize(
    ("field", "value"), [("cpus", 0.0), ("memory_mb", 8), ("pids", 1), ("runtime", "k8s")]
)
def test_config_refuses_unusable_limits(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        ContainerConfig.model_validate({field: value})


def test_config_defaults_to_auto_with_limits() -> None:
    container = ChoirConfig.model_validate({"global_repo": {"url": ""}}).container
    assert (container.runtime, container.cpus, container.memory_mb, container.pids) == (
        "auto",
        1.0,
        2048,
        512,
    )
    assert container.network == "choir"
    assert (container.allow_host_access, container.allow_metadata) == (False, False)
    assert container.agent_uid_base == 2_000_000_000


@pytest.mark.parametrize(
    ("endpoint", "loopback"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:9/v1", True),
        ("http://[::1]:9/v1", True),
        ("http://172.17.0.1:8080/v1", False),
        ("https://openrouter.ai/api/v1", False),
        (None, False),
    ],
)
def test_a_loopback_model_endpoint_is_noticed(endpoint: str | None, loopback: bool) -> None:
    model: dict[str, Any] = {"provider": "scripted" if endpoint is None else "x", "model": "m"}
    if endpoint is not None:
        model["endpoint"] = endpoint
    config = ChoirConfig.model_validate({"global_repo": {"url": ""}, "models": {"m": model}})
    assert (loopback_endpoint(config, "m") is not None) == loopback


REPO = "/home/op/.choir.d/sources/agents/a"
REPO_LINE = f"573 560 254:0 {REPO} /agent-repo ro,relatime - ext4 /dev/vda rw\n"


def with_repo(rw: bool = False) -> dict[str, Any]:
    """`inspected()` of a container created with the agent's repo (`create_options(repo=…)`)."""
    inspect = inspected()
    mount = {"Type": "bind", "Source": REPO, "Destination": REPO_TARGET, "RW": rw}
    inspect["Mounts"].append(mount)
    return inspect


def repo_failed(inspect: dict[str, Any], mountinfo: str | None) -> list[str]:
    checks = check_container(
        PROFILE,
        inspect,
        workspace=WS,
        socket=SOCK,
        repo=REPO,
        proc_status=PROC,
        mountinfo=mountinfo,
    )
    return [check.item for check in checks if not check.ok]


def test_the_repo_is_mounted_read_only_at_agent_repo_only_when_given() -> None:
    options = create_options(PROFILE, workspace=WS, socket=SOCK, repo=REPO)
    assert options["volumes"][REPO] == {"bind": "/agent-repo", "mode": "ro"}
    assert len(options["volumes"]) == 3
    assert REPO not in create_options(PROFILE, workspace=WS, socket=SOCK)["volumes"]

    checks = check_container(
        PROFILE,
        with_repo(),
        workspace=WS,
        socket=SOCK,
        repo=REPO,
        proc_status=PROC,
        mountinfo=MOUNTINFO + REPO_LINE,
    )
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    assert checks[-1].item == "repo_read_only"
    assert checks[-1].actual == "kernel: relatime,ro"
    (mounts,) = [c for c in checks if c.item == "only_workspace_and_socket_mounted"]
    assert f"bind:{REPO}->/agent-repo (ro)" in mounts.expected


@pytest.mark.parametrize(
    ("inspect", "mountinfo", "items"),
    [
        # asked read-write: the mount list fails, and the kernel's word with it
        (with_repo(rw=True), MOUNTINFO + REPO_LINE.replace(" ro,", " rw,"), None),
        # docker says ro, the kernel rw (an engine ignoring the mode)
        (with_repo(), MOUNTINFO + REPO_LINE.replace(" ro,", " rw,"), ["repo_read_only"]),
        # started with it, gone now
        (inspected(), MOUNTINFO, ["only_workspace_and_socket_mounted", "repo_read_only"]),
        # no kernel view: docker's word decides, and nosuid is unknown
        (with_repo(rw=True), None, None),
    ],
)
def test_a_writable_or_missing_repo_mount_fails(
    inspect: dict[str, Any], mountinfo: str | None, items: list[str] | None
) -> None:
    found = repo_failed(inspect, mountinfo)
    if items is None:
        assert {"only_workspace_and_socket_mounted", "repo_read_only"} <= set(found), found
    else:
        assert found == items


def test_a_repo_mount_the_agent_was_not_started_with_fails_the_mount_list() -> None:
    assert failed(with_repo()) == ["only_workspace_and_socket_mounted"]
