"""The Pod and workspace claim a Kubernetes runtime would create for an agent — as data only.

Not a runtime: nothing here talks to a cluster, and no flag or config value offers Kubernetes
(docs/SCALING.md says what building the runtime would take). It pins down the part that can be
tested without a cluster: that an agent pod carries the same §15.3 hardening the Docker runtime
applies, because it is derived from the same `SecurityProfile` object (`agent_profile`), field by
field — as `create_options` derives the container's:

    profile                   docker (`create_options`)           pod (`agent_pod`)
    user `uid:gid`            user                                runAsUser/runAsGroup/fsGroup,
                                                                  runAsNonRoot
    cap_drop                  cap_drop                            capabilities.drop
    no-new-privileges         security_opt                        allowPrivilegeEscalation false
    (always)                  read_only                           readOnlyRootFilesystem
    (engine default)          default seccomp                     seccompProfile RuntimeDefault
    tmpfs /tmp, /run          tmpfs (size)                        emptyDir medium Memory (sizeLimit)
    limits cpus, memory       nano_cpus, mem_limit                limits = requests (Guaranteed)
    limits pids               pids_limit                          the kubelet's podPidsLimit
                                                                  (no per-pod field; SCALING.md)
    never privileged, no host namespaces, no devices, no engine socket: the same, plus no service
    account token and no service links (both would put credentials or addresses into the pod).

What differs from Docker by design: the workspace is a PersistentVolumeClaim (`workspace_claim`),
not a host directory; there is no agent socket — the agent reaches choird over HTTPS
(`--control-plane=http`), verifying choird's certificate from a ConfigMap; the lease token goes
in on stdin through the attach API (`stdin`/`stdinOnce`), as the Docker runtime does it, never in
the environment, a Secret or the pod spec. The image is pulled from a registry by digest, so
what runs is exactly what choird built (§15.1's drift check holds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from choir.core.security.profile import TMPFS_SIZES, WORKSPACE_TARGET, SecurityProfile
from choir.daemon.runtimes.container_spec import container_environment

CA_DIR_TARGET: Final = "/run/choir"
"""Where choird's CA certificate is mounted (read-only): the path the socket has under Docker."""
CA_FILE: Final = "ca.crt"
LABEL_PREFIX: Final = "choir.dev"
NO_NEW_PRIVILEGES: Final = "no-new-privileges"
_DIGEST: Final = re.compile(r"^[a-z0-9.-]+(?::[0-9]+)?/[^@\s]+@sha256:[0-9a-f]{64}$")
"""`registry.host[:port]/path@sha256:<64 hex>`: a registry, and the image pinned by digest."""
_TMPFS_SIZE: Final = re.compile(r"^(?P<n>[0-9]+)(?P<unit>[kmg])$")


@dataclass(frozen=True, slots=True)
class PodTarget:
    """Where and as what the agent's pod runs; everything else comes from the profile."""

    agent_id: str
    session_id: str
    image: str
    """The agent image in a registry, by digest: `registry.example:5000/choir/agent-1@sha256:…`."""
    endpoint: str
    """choird's HTTPS URL as the pod reaches it (a Service, or an Ingress)."""
    ca_config_map: str
    """The ConfigMap holding choird's CA certificate under the key `ca.crt` (public: no Secret)."""
    workspace_claim: str
    """The PersistentVolumeClaim of the agent's workspace (`workspace_claim` makes one)."""
    namespace: str = "choir"
    name_suffix: str = "0"
    """Makes the pod's name unique per start (choird would pass a few random hex digits)."""


def agent_pod(profile: SecurityProfile, target: PodTarget) -> dict[str, Any]:
    """The Pod manifest (`v1`) running `target`'s agent under `profile`. Pure.

    Raises ValueError for what no hardened pod may be: root, a kept capability list that is not
    "drop everything", privilege escalation allowed, an image not pinned by digest in a registry,
    an endpoint that is not HTTPS."""
    uid, gid = _user(profile.user)
    _require(profile, target)
    limits = {
        "cpu": f"{round(profile.limits.cpus * 1000)}m",
        "memory": str(profile.limits.memory_bytes),
    }
    container = {
        "name": "agent",
        "image": target.image,
        "imagePullPolicy": "IfNotPresent",  # by digest: the node's copy is the same bytes
        "command": list(agent_command(target.endpoint)),
        "workingDir": WORKSPACE_TARGET,
        "env": [
            {"name": name, "value": value}
            for name, value in container_environment(target.agent_id, target.session_id).items()
        ],
        "stdin": True,  # the lease token, through the attach API, then stdin closes
        "stdinOnce": True,
        "tty": False,
        "resources": {"limits": dict(limits), "requests": dict(limits)},
        "securityContext": {
            "runAsUser": uid,
            "runAsGroup": gid,
            "runAsNonRoot": True,
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": list(profile.cap_drop)},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "workspace", "mountPath": WORKSPACE_TARGET},
            {"name": "choird-ca", "mountPath": CA_DIR_TARGET, "readOnly": True},
            *({"name": _scratch_name(path), "mountPath": path} for path in sorted(TMPFS_SIZES)),
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(target.agent_id, target.name_suffix),
            "namespace": target.namespace,
            "labels": labels(target.agent_id, target.session_id),
        },
        "spec": {
            "restartPolicy": "Never",  # choird decides: a crashed session is resumed by it
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "hostNetwork": False,
            "hostPID": False,
            "hostIPC": False,
            "securityContext": {
                "runAsUser": uid,
                "runAsGroup": gid,
                "runAsNonRoot": True,
                "fsGroup": gid,  # the workspace volume is the agent's, as its directory is
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [container],
            "volumes": [
                {
                    "name": "workspace",
                    "persistentVolumeClaim": {"claimName": target.workspace_claim},
                },
                {
                    "name": "choird-ca",
                    "configMap": {
                        "name": target.ca_config_map,
                        "items": [{"key": CA_FILE, "path": CA_FILE}],
                        "defaultMode": 0o444,
                    },
                },
                *(
                    {
                        "name": _scratch_name(path),
                        "emptyDir": {"medium": "Memory", "sizeLimit": _quantity(size)},
                    }
                    for path, (size, _mode) in sorted(TMPFS_SIZES.items())
                ),
            ],
        },
    }


def workspace_claim(
    name: str, *, size: str, storage_class: str | None = None, namespace: str = "choir"
) -> dict[str, Any]:
    """The PersistentVolumeClaim (`v1`) of one workspace: one node mounts it read-write at a
    time, as §9's exclusive workspace lease lets one session hold it."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {f"{LABEL_PREFIX}/workspace": name},
        },
        "spec": spec,
    }


def agent_command(endpoint: str) -> tuple[str, ...]:
    """choir-agent over HTTPS to `endpoint`, verifying choird by the mounted CA certificate."""
    return (
        "choir-agent",
        "--control-plane=http",
        f"--endpoint={endpoint}",
        f"--ca-file={CA_DIR_TARGET}/{CA_FILE}",
        "--root=/choir",
        f"--workspace={WORKSPACE_TARGET}",
        "--lease-token-stdin",
    )


def pod_name(agent_id: str, suffix: str) -> str:
    """`choir-<agent-id>-<suffix>` as a DNS-1123 label (agent ids may hold `_`, names may not)."""
    name = f"choir-{agent_id.replace('_', '-')}-{suffix}".lower()
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name):
        raise ValueError(f"pod name {name!r} is not a DNS-1123 label: use a shorter suffix")
    return name


def labels(agent_id: str, session_id: str) -> dict[str, str]:
    """What finds an agent's pods again (adoption, as the Docker runtime's labels do)."""
    return {f"{LABEL_PREFIX}/agent": agent_id, f"{LABEL_PREFIX}/session": session_id}


def _user(user: str) -> tuple[int, int]:
    uid_text, _, gid_text = user.partition(":")
    uid, gid = int(uid_text), int(gid_text or uid_text)
    if uid == 0 or gid == 0:
        raise ValueError(f"an agent never runs as root (user {user!r}): §15.3")
    return uid, gid


def _require(profile: SecurityProfile, target: PodTarget) -> None:
    if tuple(profile.cap_drop) != ("ALL",):
        raise ValueError(f"an agent pod drops every capability, not only {profile.cap_drop}")
    if NO_NEW_PRIVILEGES not in profile.security_opt:
        raise ValueError("an agent pod never allows privilege escalation (no-new-privileges)")
    if not _DIGEST.fullmatch(target.image):
        raise ValueError(
            f"image {target.image!r} must be a registry reference pinned by digest "
            "(host/path@sha256:…): a node must run exactly what choird built"
        )
    if not target.endpoint.startswith("https://"):
        raise ValueError(f"choird's endpoint {target.endpoint!r} must be https:// (§12.1)")


def _scratch_name(path: str) -> str:
    return "scratch" + path.replace("/", "-")


def _quantity(size: str) -> str:
    """A tmpfs size (`512m`) as a Kubernetes quantity (`512Mi`)."""
    match = _TMPFS_SIZE.fullmatch(size)
    if match is None:
        raise ValueError(f"tmpfs size {size!r} is not <number>k|m|g")
    return f"{match['n']}{match['unit'].upper()}i"
