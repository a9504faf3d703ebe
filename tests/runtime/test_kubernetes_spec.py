"""The Kubernetes pod an agent would run in, checked against the §15.3 profile it is built from.

No cluster: `agent_pod` is pure. Each test builds the profile the Docker runtime would use
(`agent_profile` on a `choirctl init` config) or any profile hypothesis draws, and reads the
manifest as the API server would: every §15.3 item of the profile is in the pod's
securityContext, resources and volumes, matching what `create_options` gives Docker for the same
profile; and nothing secret (no token, no key, no Secret, no service account) is in the pod.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from choir.config import SecretStore, load_home
from choir.core.security.profile import (
    TMPFS_SIZES,
    ContainerLimits,
    SecurityProfile,
    create_options,
    nano_cpus,
)
from choir.daemon.runtimes.container_spec import agent_profile
from choir.daemon.runtimes.kubernetes_spec import (
    PodTarget,
    agent_pod,
    pod_name,
    workspace_claim,
)
from choir.home import ChoirHome
from tests.harness.homes import make_home

DIGEST = "sha256:" + "ab" * 32
TARGET = PodTarget(
    agent_id="agent_1",
    session_id="s-0123456789abcdef",
    image=f"registry.example:5000/choir/agent-1@{DIGEST}",
    endpoint="https://choird.choir.svc:8443",
    ca_config_map="choird-ca",
    workspace_claim="ws-default",
    name_suffix="3f9a",
)
IDENTITY_ENV = {"HOME", "LANG", "CHOIR_AGENT_ID", "CHOIR_SESSION_ID"}


def container(pod: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod["spec"]["containers"]
    agent: dict[str, Any] = only
    return agent


def volumes(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {volume["name"]: volume for volume in pod["spec"]["volumes"]}


def mounts(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {mount["mountPath"]: mount for mount in container(pod)["volumeMounts"]}


def check_against(profile: SecurityProfile, pod: dict[str, Any]) -> None:
    """Every §15.3 item of `profile` in `pod`, and the same values Docker gets for it."""
    docker = create_options(profile, workspace="/srv/ws", socket="/srv/socks/agent/choir.sock")
    uid, _, gid = profile.user.partition(":")
    spec, agent = pod["spec"], container(pod)
    context = agent["securityContext"]
    # the user: never root, the profile's uid:gid, the workspace volume its group's
    assert (context["runAsUser"], context["runAsGroup"]) == (int(uid), int(gid))
    assert context["runAsNonRoot"] is spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["fsGroup"] == int(gid)
    assert f"{context['runAsUser']}:{context['runAsGroup']}" == docker["user"]
    # capabilities, privileges, root filesystem, seccomp
    assert context["capabilities"] == {"drop": docker["cap_drop"]} == {"drop": ["ALL"]}
    assert "add" not in context["capabilities"]
    assert context["allowPrivilegeEscalation"] is False
    assert "no-new-privileges" in docker["security_opt"]
    assert context["privileged"] is docker["privileged"] is False
    assert context["readOnlyRootFilesystem"] is docker["read_only"] is True
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    # no host namespace, no service account, no service links
    assert (spec["hostNetwork"], spec["hostPID"], spec["hostIPC"]) == (False, False, False)
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    # limits: what Docker caps, requested as much (Guaranteed QoS: never evicted first)
    resources = agent["resources"]
    assert resources["limits"] == resources["requests"]
    millicpus = int(resources["limits"]["cpu"].removesuffix("m"))
    assert millicpus * 1_000_000 == pytest.approx(docker["nano_cpus"], abs=500_000)
    assert int(resources["limits"]["memory"]) == docker["mem_limit"] == docker["memswap_limit"]
    # writable scratch only where Docker mounts its tmpfs, in memory, bounded
    scratch = {
        path: volumes(pod)[mount["name"]]
        for path, mount in mounts(pod).items()
        if "emptyDir" in volumes(pod)[mount["name"]]
    }
    assert set(scratch) == set(docker["tmpfs"]) == set(TMPFS_SIZES)
    for path, volume in scratch.items():
        size = TMPFS_SIZES[path][0]
        assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": size[:-1] + "Mi"}
        assert f"size={size}" in docker["tmpfs"][path]
    # the workspace where Docker binds it; nothing of the host
    assert mounts(pod)["/workspace"]["name"] == "workspace"
    assert volumes(pod)["workspace"]["persistentVolumeClaim"] == {"claimName": "ws-default"}
    assert not any("hostPath" in volume for volume in spec["volumes"])


def check_no_secrets(pod: dict[str, Any]) -> None:
    agent = container(pod)
    assert {variable["name"] for variable in agent["env"]} == IDENTITY_ENV
    assert all(set(variable) == {"name", "value"} for variable in agent["env"])  # no valueFrom
    assert "envFrom" not in agent
    assert not any("secret" in volume for volume in pod["spec"]["volumes"])
    assert not any("projected" in volume for volume in pod["spec"]["volumes"])
    assert mounts(pod)["/run/choir"]["readOnly"] is True  # choird's CA certificate: public
    assert "--lease-token-stdin" in agent["command"]  # the token goes in on stdin
    assert (agent["stdin"], agent["stdinOnce"], agent["tty"]) == (True, True, False)


def test_the_pod_of_a_docker_agent_profile(root) -> None:
    """The very profile the Docker runtime makes for agent-1 of a `choirctl init` home."""
    home = make_home(root)
    loaded = load_home(ChoirHome(home.root))
    profile = agent_profile(loaded.config, "agent-1", "bridge")

    pod = agent_pod(profile, TARGET)

    check_against(profile, pod)
    check_no_secrets(pod)
    agent = container(pod)
    assert agent["command"] == [
        "choir-agent",
        "--control-plane=http",
        "--endpoint=https://choird.choir.svc:8443",
        "--ca-file=/run/choir/ca.crt",
        "--root=/choir",
        "--workspace=/workspace",
        "--lease-token-stdin",
    ]
    assert agent["image"].endswith(DIGEST)
    assert pod["metadata"]["name"] == "choir-agent-1-3f9a"
    assert pod["metadata"]["labels"] == {
        "choir.dev/agent": "agent_1",
        "choir.dev/session": "s-0123456789abcdef",
    }
    assert pod["spec"]["restartPolicy"] == "Never"
    serialized = json.dumps(pod)  # a manifest kubectl could take as it is
    secrets = SecretStore.load(home.secrets_file)
    for name in secrets.names():
        value = secrets.get(name).get_secret_value()
        assert not value or value not in serialized, f"secret {name} in the pod"


@given(
    cpus=st.floats(min_value=0.1, max_value=64, allow_nan=False).map(lambda c: round(c, 2)),
    memory_mb=st.integers(min_value=64, max_value=1 << 20),
    pids=st.integers(min_value=16, max_value=1 << 16),
    uid=st.integers(min_value=1, max_value=(1 << 31) - 1),
    gid=st.integers(min_value=1, max_value=(1 << 31) - 1),
)
def test_any_profile_gives_a_pod_as_hardened(
    cpus: float, memory_mb: int, pids: int, uid: int, gid: int
) -> None:
    profile = SecurityProfile(ContainerLimits(cpus, memory_mb << 20, pids), f"{uid}:{gid}")

    pod = agent_pod(profile, TARGET)

    check_against(profile, pod)
    check_no_secrets(pod)
    assert int(container(pod)["resources"]["limits"]["cpu"][:-1]) == round(
        nano_cpus(cpus) / 1_000_000
    )


LIMITS = ContainerLimits(1.0, 1 << 30, 256)


@pytest.mark.parametrize(
    ("profile", "target", "says"),
    [
        (SecurityProfile(LIMITS, "0:0"), TARGET, "never runs as root"),
        (SecurityProfile(LIMITS, "1000:0"), TARGET, "never runs as root"),
        (SecurityProfile(LIMITS, "1000:1000", cap_drop=("NET_RAW",)), TARGET, "every capab"),
        (SecurityProfile(LIMITS, "1000:1000", security_opt=()), TARGET, "privilege escalation"),
        (
            SecurityProfile(LIMITS, "1000:1000"),
            replace(TARGET, image="choir-agent-1:latest"),
            "pinned by digest",
        ),
        (
            SecurityProfile(LIMITS, "1000:1000"),
            replace(TARGET, endpoint="http://choird:8080"),
            "must be https://",
        ),
    ],
)
def test_what_no_agent_pod_may_be_is_refused(
    profile: SecurityProfile, target: PodTarget, says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        agent_pod(profile, target)


def test_names_and_the_workspace_claim() -> None:
    assert pod_name("agent_1", "0") == "choir-agent-1-0"
    with pytest.raises(ValueError, match="DNS-1123"):
        pod_name("a" * 31, "x" * 40)
    claim = workspace_claim("ws-default", size="20Gi", storage_class="fast")
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "20Gi"}},
        "storageClassName": "fast",
    }
    assert (claim["kind"], claim["metadata"]["namespace"]) == ("PersistentVolumeClaim", "choir")
