"""Egress filtering of agent containers: the choir network of config's policy and its rules.

At every docker start `egress_network` makes sure the choir-managed network of the policy
(`container.allow_host_access`, `allow_metadata`) exists, then `filter_egress` (re)installs its
iptables chains (`egress_rules`) — idempotent, and cheap enough to repair rules someone flushed;
`prepare_egress` is both in turn. It never
fails a start on its own: when choird cannot filter (not root, no iptables, the operator's own
network) it says why, choird warns, and `agent verify`'s `egress_filtered` item reports it as
advisory. `observe` reads the rules back for `agent verify`: once choird filters, missing rules
fail the check (and the start). `open_link` makes the one hole agents on docker need under
`--transport http`: choird's listener on the bridge gateway (`bridge_link`), nothing else.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from choir.adapters import iptables
from choir.adapters.docker.containers import ContainerEngine
from choir.config.container import MANAGED_NETWORK, ContainerConfig
from choir.core.security.egress_rules import (
    EgressPolicy,
    chain_rules,
    jumps,
    link_chain,
    link_rule,
    listed_rules,
    restore_script,
)
from choir.core.security.host import EgressView
from choir.errors import ChoirError

NETWORK_LABELS: Final = {"choir.managed": "true", "choir.role": "egress"}
RULES_IN_PLACE: Final = "rules in place"


@dataclass(frozen=True)
class EgressSetup:
    """How the agents of one start reach the network."""

    network: str
    policy: EgressPolicy | None
    """None on the operator's own network (nothing choir filters)."""
    enforced: bool
    detail: str
    forward: str = "DOCKER-USER"
    """The built-in chain our forward chain hangs from."""

    def view(self, *, rules_ok: bool, detail: str) -> EgressView:
        described = self.policy.describe() if self.policy else "unfiltered (operator's network)"
        return EgressView(self.network, described, self.enforced, rules_ok, detail)


async def prepare_egress(engine: ContainerEngine, config: ContainerConfig) -> EgressSetup:
    """The network agents start on now, with its rules installed when choird can."""
    await egress_network(engine, config)
    return await filter_egress(config)


async def egress_network(engine: ContainerEngine, config: ContainerConfig) -> str:
    """The network agents start on now, made when it is choir's and missing (no rules yet:
    `filter_egress` installs them, and may run while a container is created on it)."""
    if config.network != MANAGED_NETWORK:
        return config.network
    network = _policy(config).network()
    await engine.ensure_network(network, NETWORK_LABELS)
    return network


async def filter_egress(config: ContainerConfig) -> EgressSetup:
    """The rules of `egress_network`'s network installed when choird can: before any
    container on it starts."""
    if config.network != MANAGED_NETWORK:
        return EgressSetup(
            config.network,
            None,
            enforced=False,
            detail=f"{config.network} is not choir's network: set container.network to "
            f"{MANAGED_NETWORK} to filter what agents reach",
        )
    policy = _policy(config)
    network = policy.network()
    if not policy.blocks_anything:
        detail = "nothing to block (allow_host_access and allow_metadata)"
        return EgressSetup(network, policy, enforced=True, detail=detail)
    reason = iptables.unavailable()
    if reason is not None:
        return EgressSetup(network, policy, enforced=False, detail=f"{reason}: rules not installed")
    try:
        forward = await asyncio.to_thread(_install, policy)
    except ChoirError as error:
        return EgressSetup(network, policy, enforced=False, detail=error.message)
    return EgressSetup(network, policy, enforced=True, detail=RULES_IN_PLACE, forward=forward)


def _policy(config: ContainerConfig) -> EgressPolicy:
    return EgressPolicy(config.allow_host_access, config.allow_metadata)


def observe(setup: EgressSetup, link: tuple[str, int] | None = None) -> EgressView:
    """What `agent verify` sees now (blocking: iptables calls); `link`: the gateway and port
    of choird's listener the agent uses (`open_link`), whose rule must be there too."""
    if not setup.enforced or setup.policy is None or not setup.policy.blocks_anything:
        return setup.view(rules_ok=setup.enforced, detail=setup.detail)
    try:
        missing = _missing(setup.policy, setup.forward)
        if link is not None and _blocks_host(setup) and not _has_opening(setup, *link):
            missing.append(f"no opening to choird's listener {link[0]}:{link[1]}")
    except ChoirError as error:
        return setup.view(rules_ok=False, detail=error.message)
    if missing:
        return setup.view(rules_ok=False, detail=f"rules missing: {'; '.join(missing)}")
    return setup.view(rules_ok=True, detail=RULES_IN_PLACE)


def open_link(setup: EgressSetup, gateway: str, port: int) -> bool:
    """The rule that lets the network's containers reach `gateway:port` over TCP, added unless
    it is there (blocking); whether one is needed — False when nothing blocks the host (not
    filtered, or `allow_host_access`). Agents reach choird's listener there (`bridge_link`)."""
    if not _blocks_host(setup):
        return False
    assert setup.policy is not None
    chain, rule = link_chain(setup.network), link_rule(gateway, port)
    iptables.ensure_chain(chain)
    if not iptables.has_rule(chain, rule):
        iptables.append(chain, rule)
    return True


def close_link(setup: EgressSetup, gateway: str, port: int) -> None:
    """`open_link`'s rule removed (blocking); none there is fine (a flush took it)."""
    if not _blocks_host(setup):
        return
    chain, rule = link_chain(setup.network), link_rule(gateway, port)
    while iptables.has_rule(chain, rule):
        iptables.delete(chain, rule)


def _has_opening(setup: EgressSetup, gateway: str, port: int) -> bool:
    return iptables.has_rule(link_chain(setup.network), link_rule(gateway, port))


def _blocks_host(setup: EgressSetup) -> bool:
    return setup.enforced and setup.policy is not None and not setup.policy.host_access


def _install(policy: EgressPolicy) -> str:
    iptables.ensure_chain(link_chain(policy.network()))  # CHOIR-IN jumps to it: made first
    iptables.restore(restore_script(policy))
    forward = "DOCKER-USER" if iptables.chain_exists("DOCKER-USER") else "FORWARD"
    for jump in jumps(policy.network(), forward):
        if not iptables.has_rule(jump.chain, jump.rule):
            iptables.insert_first(jump.chain, jump.rule)
    return forward


def _missing(policy: EgressPolicy, forward: str) -> list[str]:
    missing = []
    for chain, rules in chain_rules(policy).items():
        if listed_rules(chain, iptables.listing(chain)) != rules:
            missing.append(f"{chain} differs")
    for jump in jumps(policy.network(), forward):
        if not iptables.has_rule(jump.chain, jump.rule):
            missing.append(f"no jump from {jump.chain}")
    return missing
