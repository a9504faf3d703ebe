"""`choir`: the umbrella command — `choir up`, `choir down`, `choir restart`, `choir tui`.

`up`, `down` and `restart` print one progress line per step; errors are one line on stderr with the
documented exit codes (`choir.errors.ExitCode`), never a traceback. `--json` prints one JSON
object on stdout for scripts (progress then goes to stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from choir.errors import ChoirError, ExitCode, one_line

DESCRIPTION = "choir: run the embedded default (choird, the default agent, the console)."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="choir", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", metavar="<command>")
    up = commands.add_parser(
        "up",
        help="initialise $CHOIR_HOME if needed, start choird and the default agent, open the "
        "console",
        description="Initialise $CHOIR_HOME if missing (embedded Postgres, console DM, the demo "
        "model unless OPENROUTER_API_KEY or OPENAI_API_KEY is set), start choird in the "
        "background, build and start the default agent, then open the console. Running it "
        "again finds everything up and says so.",
    )
    _home(up)
    up.add_argument("--agent", help="the agent to start (default: agent-1)")
    up.add_argument(
        "--runtime",
        choices=("auto", "docker", "process"),
        help="where agents run when choird starts: docker (sandboxed), process (host "
        "subprocesses, in bwrap where it works, else unsandboxed) or auto (docker when an "
        "engine answers); default: config.json container.runtime",
    )
    up.add_argument(
        "--no-tui",
        dest="tui",
        action="store_false",
        help="print status instead of opening the console (also when not on a terminal)",
    )
    _json(up)
    down = commands.add_parser(
        "down",
        help="stop agents gracefully, then choird",
        description="Stop every running agent gracefully (session summary, final flush), then "
        "choird and its embedded Postgres. Leaves no agent process, container or lease behind.",
    )
    _home(down)
    _json(down)
    restart = commands.add_parser(
        "restart",
        help="restart choird in place; agents keep running",
        description="Restart choird in place (same pid) to put choird-level config into "
        "effect: it stops serving, re-executes itself and adopts its agents, which keep "
        "running and keep their sessions; it waits (up to 30 s) for each to reconnect and "
        "exits 1, naming it, when one does not. Refused, with nothing stopped, when choird "
        "cannot re-execute itself or its config would not load.",
    )
    _home(restart)
    _json(restart)
    commands.add_parser("tui", help="the full-screen operator console (see choir tui --help)")
    return parser


def _home(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help="choir state directory (default $CHOIR_HOME or ~/.choir.d)")


def _json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object for scripts")


def main(argv: Sequence[str] | None = None) -> None:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["tui"]:  # the console parses its own arguments
        _run("tui", lambda: _tui(words[1:]))
        return
    args = _parser().parse_args(words)
    if args.command is None:
        _parser().print_help()
        return
    commands = {"up": _up, "down": _down, "restart": _restart}
    _run(args.command, lambda: commands[args.command](args))


def _run(command: str, work: Callable[[], None]) -> None:
    """`work`, with a ChoirError as one line on stderr and its exit code."""
    try:
        work()
    except ChoirError as error:
        from choir.ctl.render.visible import visible

        # the message may quote an agent (a failed resume's reason): shown, never interpreted
        sys.stderr.write(f"choir {command}: error: {visible(one_line(error.message))}\n")
        sys.exit(int(error.exit_code))
    except KeyboardInterrupt:
        sys.exit(130)


def _up(args: argparse.Namespace) -> None:
    from choir.home import ChoirHome
    from choir.launch.up import UpOptions, up

    home = ChoirHome.resolve(args.home)
    options = UpOptions(home, args.agent, args.tui, args.json, args.runtime)
    summary = up(options)
    if args.json:
        _print_json(summary)
        return
    console = _console()
    if args.tui and console is not None and sys.stdin.isatty() and sys.stdout.isatty():
        console.ChoirApp(home).run()
        print("choird and the agents keep running: choir tui reopens the console, choir down stops")
        return
    print("\n".join(status_lines(summary, console_ready=console is not None)))


def _down(args: argparse.Namespace) -> None:
    from choir.home import ChoirHome
    from choir.launch.down import down
    from choir.launch.up import Steps

    summary = down(ChoirHome.resolve(args.home), Steps(sys.stderr if args.json else sys.stdout))
    if args.json:
        _print_json(summary)


def _restart(args: argparse.Namespace) -> None:
    from choir.home import ChoirHome
    from choir.launch.restart import all_back, restart
    from choir.launch.up import Steps

    summary = restart(ChoirHome.resolve(args.home), Steps(sys.stderr if args.json else sys.stdout))
    if args.json:
        _print_json(summary)
    if not all_back(summary):  # each agent not back has had its warning line
        sys.exit(int(ExitCode.ERROR))


def _tui(rest: list[str]) -> None:
    console = _console()
    if console is None:
        raise ChoirError(
            "the console is not in this version yet: use choirctl (choirctl status, "
            "choirctl chat agent-1 'hello')"
        )
    console.main(rest)


def _console() -> Any:
    """`tui.app` when the console is installed, else None."""
    try:
        import tui.app
    except ImportError:
        return None
    return tui.app


def status_lines(summary: dict[str, Any], *, console_ready: bool) -> list[str]:
    """What `choir up --no-tui` prints last: what runs and how to use it."""
    agent = summary["agent"]
    agent_id = agent["agent_id"]
    from choir.ctl.agent.views import sandbox_word

    sandbox = sandbox_word(agent.get("runtime"), agent.get("sandboxed"))
    llm = agent["bindings"].get("llm")
    console = "choir tui" if console_ready else "choir tui (the console is coming: use choirctl)"
    return [
        "",
        f"choir is up: choird pid {summary['choird_pid']}, home {summary['home']}",
        f"  {agent_id:<10}{agent['state']}, session {agent['session_id']}, "
        f"{agent.get('runtime')} runtime ({sandbox}), model {llm}",
        f'  {"talk":<10}choirctl chat {agent_id} "hello"',
        f"  {'status':<10}choirctl agent status {agent_id}",
        f"  {'console':<10}{console}",
        f"  {'stop':<10}choir down",
    ]


def _print_json(data: Any) -> None:
    import json

    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
