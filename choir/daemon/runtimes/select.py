"""Which agent runtime choird uses: `--runtime`, else config.json `container.runtime` (§15).

`auto` (the default) is docker when an engine answers, else the process runtime — logged as a
warning, since its agents run in bwrap at best (fewer limits than a container) and unsandboxed
where bwrap cannot run. An explicit `docker` with no engine refuses to start, naming the process
runtime as the way to run without one.
"""

from __future__ import annotations

import os

from choir.daemon.runtimes.agent_link import LinkFn, NetworkLinkFn, no_link, no_network_link
from choir.daemon.runtimes.base import AgentRuntime, PushFn, RuntimeChoice
from choir.daemon.runtimes.bwrap import SandboxFound
from choir.daemon.runtimes.container_spec import ConfigFn
from choir.daemon.runtimes.process import ProcessRuntime
from choir.daemon.sessions.service import SessionService
from choir.errors import UnavailableError
from choir.home import ChoirHome
from choir.logs import get_logger

log = get_logger("choird.runtime")


async def select_runtime(
    choice: RuntimeChoice,
    home: ChoirHome,
    sessions: SessionService,
    push: PushFn,
    config: ConfigFn,
    link: LinkFn = no_link,
    network_link: NetworkLinkFn = no_network_link,
    sandbox: SandboxFound | None = None,
) -> AgentRuntime:
    """The runtime for `choice`; UnavailableError when docker is required and absent. `link`
    is choird's HTTP(S) listener for the process runtime's agents, `network_link` its listener
    on a docker network's gateway for the docker runtime's (`agent_link`, `bridge_link`);
    `sandbox`, bwrap as already probed for the process runtime (None: probed now)."""
    if choice == "process":
        return ProcessRuntime(home, sessions, push, link, sandbox)
    from choir.daemon.runtimes.docker import DockerRuntime  # the Docker SDK: only when tried

    try:
        return await DockerRuntime.connect(home, sessions, push, config, network_link)
    except UnavailableError:
        if choice == "docker":
            raise UnavailableError(no_engine_message()) from None
    runtime = ProcessRuntime(home, sessions, push, link, sandbox)
    how = "in a bwrap sandbox" if runtime.sandboxed else "unsandboxed"
    log.warning(
        "no Docker engine answers: agents run on the process runtime",
        fields={"sandbox": how, "docker_host": os.environ.get("DOCKER_HOST") or "default socket"},
    )
    return runtime


def no_engine_message() -> str:
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    return (
        f"runtime docker: no Docker engine answers at {where}: start dockerd "
        "(scripts/ensure-docker), or run agents unsandboxed with choird --runtime process "
        '(or "container": {"runtime": "process"} in config.json)'
    )
