"""choir-agent entry point; as `git-cred-helper` (argv[0]) it is git's credential helper (§14.4).

    choir-agent --control-plane=uds --socket=/run/choir/choir.sock [--root /choir] [--workspace /ws]
    choir-agent --control-plane=http --endpoint=https://host:9400 [--ca-file choird.crt]

Identity comes from the environment choird sets: CHOIR_AGENT_ID and CHOIR_SESSION_ID. The lease
token (never logged) comes from CHOIR_LEASE_TOKEN, or with --lease-token-stdin from the first line
of stdin — how choird's runtimes pass it, so no environment holds it (§14.1). Logs are JSON lines
on stderr, which the runtime captures. SIGTERM stops gracefully (exit 0).

Before anything else both entry points make the process non-dumpable, and choir-agent drops every
capability and loads the setuid filter (`choir.agent.hardening`): the tools it runs share its uid
and must not read its memory, where the lease token and the secrets are.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the credential helper must start fast: the runtime loads only when it runs
    from choir.agent.app import ChoirAgent


def main() -> None:
    # The start-up's imports allocate ~100k objects that live as long as the agent: the
    # collector's passes over them cost ~20 % of their CPU and free nothing. `ChoirAgent.run`
    # turns it on again once they are loaded.
    gc.disable()
    skip_pydantic_plugins()
    from choir.agent.hardening import harden

    if os.path.basename(sys.argv[0]) == "git-cred-helper":
        from choir.agent.credentials import helper_main

        harden(full=False)  # the rest it inherits: git runs it under the agent's tree
        sys.exit(helper_main(sys.argv))
    problems = harden()
    sys.exit(run_cli(sys.argv[1:], hardening_problems=problems))


def skip_pydantic_plugins() -> None:
    """pydantic looks for plugins when it builds its first model: an entry-point scan of every
    installed distribution, 30-45 ms of a start, after importing `importlib.metadata`. choir
    uses none (`choir.pydantic_plugins`); an operator's own value of the variable wins."""
    from choir.pydantic_plugins import skip

    skip()


def run_cli(argv: list[str], *, hardening_problems: list[str] | None = None) -> int:
    from choir.agent.app import ChoirAgent
    from choir.agent.startup import AgentOptions
    from choir.errors import ChoirError

    args = _parser().parse_args(argv)
    try:
        if args.control_plane == "http" and not args.endpoint:
            raise _usage("--control-plane=http needs --endpoint=https://<choird>:<port>")
        if args.control_plane == "http" and args.ca_file is not None:
            _check_ca_file(args.ca_file)
        target = args.endpoint if args.control_plane == "http" else Path(args.socket)
        token = _token_from_stdin() if args.lease_token_stdin else None
        options = AgentOptions.from_env(
            target,
            root=args.root,
            workspace=args.workspace,
            ca_file=args.ca_file,
            lease_token=token,
        )
        _log_to_stderr(options.agent_id)
        _report_hardening(hardening_problems or [])
        return asyncio.run(_run(ChoirAgent(options)))
    except ChoirError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return int(error.exit_code)


async def _run(runtime: ChoirAgent) -> int:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, runtime.request_stop, signal.Signals(signum).name)
    return await runtime.run()


def _log_to_stderr(agent_id: str) -> None:
    from choir.logs import JsonLinesFormatter
    from choir.logs.handler import WholeLineStreamHandler

    handler = WholeLineStreamHandler(sys.stderr)  # a full disk drops a line, never tears one
    handler.setFormatter(JsonLinesFormatter(agent_id))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(os.environ.get("CHOIR_LOG_LEVEL", "INFO").upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per LLM call is choir's own


def _report_hardening(problems: list[str]) -> None:
    from choir.logs import get_logger

    for problem in problems:
        get_logger("choir.agent").warning("process hardening incomplete", fields={"step": problem})


def _token_from_stdin() -> str:
    """The first line of stdin: how choird's runtimes hand over the lease token."""
    token = sys.stdin.readline().strip()
    if not token:
        raise _usage("--lease-token-stdin: stdin ended before a lease token was read")
    return token


def _check_ca_file(path: Path) -> None:
    """Refuse a --ca-file that is no usable certificate now, in one line, not at first connect."""
    import ssl

    from choir.transport.tls import client_context

    try:
        client_context(path)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise _usage(
            f"--ca-file {path}: not a readable PEM certificate ({reason}); pass choird's "
            "certificate, e.g. $CHOIR_HOME/tls/choird.crt"
        ) from None


def _usage(message: str) -> Exception:
    from choir.errors import UsageError

    return UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="choir-agent", description="choir's agent runtime")
    parser.add_argument("--control-plane", choices=("uds", "http"), default="uds")
    parser.add_argument("--socket", default="/run/choir/choir.sock", help="choird's agent socket")
    parser.add_argument("--endpoint", help="choird's https URL (--control-plane=http)")
    parser.add_argument("--ca-file", type=Path, help="certificate to verify choird against")
    parser.add_argument("--root", type=Path, default=Path("/choir"), help="tools, skills, identity")
    parser.add_argument("--workspace", type=Path, default=Path("/workspace"))
    parser.add_argument(
        "--lease-token-stdin",
        action="store_true",
        help="read the lease token from the first line of stdin, not CHOIR_LEASE_TOKEN",
    )
    return parser
