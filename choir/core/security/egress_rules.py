"""What an agent's network may reach, as iptables rules (pure).

§18.1 allows agents outbound web access; what they must not reach by default is this host
itself (services on its own addresses: the bridge gateway, its other IPs, ports other
containers publish on it) and link-local addresses (169.254.0.0/16: a cloud's instance metadata
service hands out the machine's credentials). config.json `container.allow_host_access` and
`allow_metadata` open either.

The rules are keyed to the bridge interface of a choir-managed docker network, never to other
containers: one network per policy (`choir`, `choir-host`, `choir-metadata`, `choir-open`), its
bridge interface named like the network, so a policy's rules never change and two homes on one
host with different configs never rewrite each other's. For each network two chains:

- `CHOIR-IN-<network>` from INPUT (`-i <bridge>`): traffic to the host's own addresses. Replies
  to connections the host opened pass; then, while the host is blocked, `CHOIR-LINK-<network>`
  decides first; link-local and then everything else are rejected unless allowed.
- `CHOIR-LINK-<network>`: one ACCEPT per choird whose agents reach its HTTPS listener on the
  bridge gateway (`link_rule`: that address, that port, TCP). Each choird adds and removes its
  own rule, and the restore above never names the chain, so two homes' listeners (two ports)
  never drop each other's (§12.1, `choir.daemon.runtimes.bridge_link`).
- `CHOIR-FWD-<network>` from DOCKER-USER (FORWARD when dockerd made none): link-local
  destinations off the host, and connections docker DNAT'ed to a port published on the host,
  are rejected unless allowed; everything else goes on to docker's own rules (outbound allowed).

Rejected, not dropped, so an agent fails at once instead of waiting for a timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

LINK_LOCAL: Final = "169.254.0.0/16"
REJECT: Final = ("-j", "REJECT", "--reject-with", "icmp-admin-prohibited")
ESTABLISHED: Final = ("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED")
PUBLISHED: Final = ("-m", "conntrack", "--ctstate", "DNAT")
"""A forwarded connection docker DNAT'ed: one to a port published on this host."""
NETWORK_PREFIX: Final = "choir"


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """What agents may reach beyond ordinary outbound access."""

    host_access: bool = False
    metadata: bool = False

    @property
    def blocks_anything(self) -> bool:
        return not (self.host_access and self.metadata)

    def network(self) -> str:
        """The choir-managed docker network (and bridge interface) of this policy."""
        if self.host_access and self.metadata:
            return f"{NETWORK_PREFIX}-open"
        if self.host_access:
            return f"{NETWORK_PREFIX}-host"
        if self.metadata:
            return f"{NETWORK_PREFIX}-metadata"
        return NETWORK_PREFIX

    def describe(self) -> str:
        blocked = [
            what
            for what, allowed in (
                ("host addresses", self.host_access),
                ("link-local", self.metadata),
            )
            if not allowed
        ]
        return f"blocks {' and '.join(blocked)}" if blocked else "blocks nothing (both allowed)"


@dataclass(frozen=True, slots=True)
class Jump:
    """A rule in a built-in chain sending the bridge's traffic to one of ours."""

    chain: str
    rule: tuple[str, ...]


def input_chain(network: str) -> str:
    return f"CHOIR-IN-{network}"


def forward_chain(network: str) -> str:
    return f"CHOIR-FWD-{network}"


def link_chain(network: str) -> str:
    return f"CHOIR-LINK-{network}"


def link_rule(gateway: str, port: int) -> tuple[str, ...]:
    """The one hole for a choird's bridge listener, as `iptables -S` prints it."""
    return ("-d", f"{gateway}/32", "-p", "tcp", "-m", "tcp", "--dport", str(port), "-j", "ACCEPT")


def chain_rules(policy: EgressPolicy) -> dict[str, list[tuple[str, ...]]]:
    """Our two chains' rules, in order, as `iptables -S` prints them (without `-A <chain>`)."""
    network = policy.network()
    incoming: list[tuple[str, ...]] = [(*ESTABLISHED, "-j", "RETURN")]
    if not policy.host_access:
        incoming.append(("-j", link_chain(network)))
    incoming.append(("-d", LINK_LOCAL, *(("-j", "RETURN") if policy.metadata else REJECT)))
    if not policy.host_access:
        incoming.append(REJECT)
    forwarded: list[tuple[str, ...]] = []
    if not policy.metadata:
        forwarded.append(("-d", LINK_LOCAL, *REJECT))
    if not policy.host_access:
        forwarded.append((*PUBLISHED, *REJECT))
    return {input_chain(network): incoming, forward_chain(network): forwarded}


def restore_script(policy: EgressPolicy) -> str:
    """`iptables-restore --noflush` input that (re)creates and fills our two chains at once."""
    rules = chain_rules(policy)
    lines = ["*filter", *(f":{chain} - [0:0]" for chain in rules)]
    for chain, chain_body in rules.items():
        lines.extend(" ".join(("-A", chain, *rule)) for rule in chain_body)
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def jumps(network: str, forward: str) -> list[Jump]:
    """Where our chains hook in: INPUT, and `forward` (DOCKER-USER, or FORWARD without it)."""
    return [
        Jump("INPUT", ("-i", network, "-j", input_chain(network))),
        Jump(forward, ("-i", network, "-j", forward_chain(network))),
    ]


def listed_rules(chain: str, listing: str) -> list[tuple[str, ...]]:
    """The rules of `chain` in `iptables -S <chain>` output, as `chain_rules` writes them."""
    prefix = ("-A", chain)
    rules = []
    for line in listing.splitlines():
        words = tuple(line.split())
        if words[:2] == prefix:
            rules.append(words[2:])
    return rules
