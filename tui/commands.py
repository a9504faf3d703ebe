"""The command palette (ctrl+p): every choirctl action, plus tabs, agents and view commands.

Entries come from `tui.actions.ACTIONS` (one per choirctl command the console covers), the tabs,
the agents to select, and each mounted view's `palette_commands()`. Running a catalogue action
happens in a worker (`perform`): ask each argument with a `TextPrompt` pre-filled from the
selection, confirm what changes something, call the verb through the bridge, and show the
outcome — a notification, a `ResultScreen` with the answer, or the progress of a long verb.
A verb this choird does not know (an older choird) is "not available in this choird", never a
crash; every refusal is choird's one-line message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from choir.commands import Param
from choir.commands.text import progress_line
from choir.errors import ChoirError, ConflictError, UsageError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import (
    MEMORY_CLASSES,
    MEMORY_MODES,
    MEMORY_STORES,
    OperatorVerb,
)
from tui.actions import ACTIONS, RECOVER_CHOICES, ConsoleAction
from tui.bridge import answer_notes, parsed_answer
from tui.dialogs import ConfirmDialog, TextPrompt
from tui.dialogs.result import ResultScreen, as_lines
from tui.views import VIEWS, ConsoleHost

if TYPE_CHECKING:
    from textual.app import App
    from textual.worker import Worker

    from choir.protocol.operator import answers as a
    from choir.protocol.operator import items as i
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")
    i = LazyModule("choir.protocol.operator.items")

Payload = dict[str, Any]


@dataclass(frozen=True)
class Entry:
    """One palette entry."""

    title: str
    help: str
    run: Callable[[], object]
    command: str | None = None
    """The choirctl command it stands for (None: console navigation)."""


class ChoirCommands(Provider):
    """Everything the console can do, by name (or by its choirctl command)."""

    def entries(self) -> Iterator[Entry]:
        app = self.app
        host = console(app)
        for action in ACTIONS:
            keys = f" · keys: {action.key}" if action.key else ""
            yield Entry(
                action.title, f"choirctl {action.command}{keys} · {action.help}",
                partial(start, app, action), action.command,
            )  # fmt: skip
        for view in VIEWS:
            yield Entry(
                f"Show {view.title}", f"({view.key}) {view.description}",
                partial(host.action_show_tab, view.view_id),
            )  # fmt: skip
        for agent_id in host.state.agents:
            yield Entry(
                f"Select agent {agent_id}", "per-agent views show it",
                partial(host.select_agent, agent_id),
            )  # fmt: skip
        for mounted in host.views.values():
            for command in mounted.palette_commands():
                yield Entry(command.title, command.help, command.run)

    async def discover(self) -> Hits:
        for entry in self.entries():
            yield DiscoveryHit(entry.title, entry.run, help=entry.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for entry in self.entries():
            score = max(matcher.match(entry.title), matcher.match(entry.command or ""))
            if score > 0:
                yield Hit(score, matcher.highlight(entry.title), entry.run, help=entry.help)


def console(app: App[Any]) -> ConsoleHost:
    """The app as the console host it is (`tui.app.ChoirApp`)."""
    return cast("ConsoleHost", app)


def start(app: App[Any], action: ConsoleAction) -> Worker[None]:
    """Run `action` in a worker (it may ask questions and wait for choird)."""
    return app.run_worker(partial(perform, app, action), name=action.title, group="palette")


async def perform(app: App[Any], action: ConsoleAction) -> None:
    """Ask, confirm, call, show: one palette action from start to end."""
    if action.mode == "view":
        open_view(app, action)
        return
    answers = await ask(app, action)
    if answers is None:
        return
    if action.confirm:
        question = action.confirm.format(**answers)
        dialog = ConfirmDialog(question, f"choirctl {action.command}", danger=action.danger)
        if not await app.push_screen_wait(dialog):
            return
    assert action.verb is not None
    try:
        if action.mode == "show":
            answer = await console(app).bridge.call(action.verb, **action.payload(answers))
            shown = as_lines(parsed_answer(action.verb, answer))
            await app.push_screen(ResultScreen(headline(action, answers), shown))
        elif action.mode == "report":
            await report(app, action, answers)
        else:
            answer = await console(app).bridge.call(action.verb, **action.payload(answers))
            done = action.done.format(command=action.command, **answers)
            notes = answer_notes(parsed_answer(action.verb, answer))
            app.notify("\n".join([done, *notes]), markup=False)
    except ChoirError as error:
        message, severity = explain(action, error)
        app.notify(message, title=action.title, severity=severity, timeout=10, markup=False)


def open_view(app: App[Any], action: ConsoleAction) -> None:
    """Show the action's tab; run its `then` there."""
    assert action.view is not None
    host = console(app)
    host.action_show_tab(action.view)
    view = host.views.get(action.view)
    if action.then and view is not None:
        getattr(view, f"action_{action.then}")()
    elif action.then:
        app.notify(f"The {action.view} tab is not available in this console.", severity="warning")


async def ask(app: App[Any], action: ConsoleAction) -> dict[str, str] | None:
    """Each argument, asked in turn; None when the operator cancels one."""
    answers: dict[str, str] = {}
    for arg in action.args:
        if arg.asked_if is not None and answers.get(arg.asked_if[0]) != arg.asked_if[1]:
            continue  # e.g. a user only for a personal item
        default, choices, strict = await options(app, arg, answers)
        optional = action.optional(arg) and arg.asked_if is None
        skip = " (enter: none)" if optional and not default and "empty" not in arg.label else ""
        label = f"{action.title}: {arg.label.lower()}?{skip}"
        prompt = TextPrompt(
            label, value=default, choices=choices, allow_empty=optional, strict=strict
        )
        answer = await app.push_screen_wait(prompt)
        if answer is None:
            return None
        answers[arg.name] = answer
    return answers


async def options(
    app: App[Any], arg: Param, answers: dict[str, str]
) -> tuple[str, list[str], bool]:
    """An argument's default, its choices, and whether only a choice is accepted."""
    state = console(app).state
    selected = state.selected_agent or ""
    if arg.kind == "agent":
        return selected, list(state.agents), True
    if arg.kind == "running_agent":
        running = [a for a, row in state.agents.items() if row.state == "running"]
        return (selected if selected in running else next(iter(running), "")), running, True
    if arg.kind == "session":
        sessions = [row.session_id for row in state.agents.values() if row.session_id]
        return state.session_of(selected) or "", sessions, False  # a crashed one counts too
    if arg.kind in ("job", "lane"):
        lanes = list(state.lanes.get(answers.get("session_id", ""), {}))
        if arg.kind == "lane":
            return "", lanes, False
        jobs = [lane.removeprefix("core:") for lane in lanes if lane.startswith("core:")]
        return next(iter(jobs), ""), jobs, False
    if arg.kind == "approval":
        pending = sorted(state.approvals, key=lambda a: str(state.approvals[a].created_at))
        return next(iter(pending), ""), pending, True
    if arg.kind == "recover_choice":
        return "resume", list(RECOVER_CHOICES), True
    if arg.kind == "memory_store":
        return MEMORY_STORES[0], list(MEMORY_STORES), False  # choird names the valid ones
    if arg.kind == "memory_mode":
        return MEMORY_MODES[0], list(MEMORY_MODES), False
    if arg.kind == "memory_class":  # empty: choird's default, and an existing item's own
        return "", list(MEMORY_CLASSES), True
    if arg.kind in ("text", "word", "item", "key_file"):
        return "", [], False  # free text: choird checks it
    return "", await listed(app, arg), True


async def listed(app: App[Any], arg: Param) -> list[str]:
    """Names choird lists for workspaces, models and voice profiles."""
    bridge = console(app).bridge
    try:
        if arg.kind == "workspace":
            workspaces = await bridge.ask(OperatorVerb.WORKSPACE_LIST, a.WorkspaceList)
            return [row.name for row in workspaces.workspaces]
        if arg.kind == "llm":
            return [
                row.name for row in (await bridge.ask(OperatorVerb.MODEL_LIST, a.ModelList)).models
            ]
        voices = await bridge.ask(OperatorVerb.VOICE_LIST, a.VoiceList)
        return [row.name for row in voices.voice_profiles]
    except ChoirError:
        return []  # choird answers the call itself with the reason


async def report(app: App[Any], action: ConsoleAction, answers: dict[str, str]) -> None:
    """A long verb: its progress lines as they come, then its result, on one screen."""
    assert action.verb is not None
    screen = ResultScreen(headline(action, answers), status="working…")
    await app.push_screen(screen)
    verb = OperatorVerb(action.verb)
    async for item in console(app).bridge.items(verb, **action.payload(answers)):
        if isinstance(item, i.Progress):
            screen.add([progress_line(item.model_dump(mode="json"))])
            continue
        screen.add(as_lines(item.result))  # the result item (BuildResult, UpdateResult…)
        screen.finish("done")
        return
    screen.finish("choird closed the stream before answering: see the Logs tab")


def headline(action: ConsoleAction, answers: dict[str, str]) -> str:
    words = " ".join(value for value in answers.values() if value)
    return f"{action.title} — choirctl {action.command} {words}".rstrip()


def explain(action: ConsoleAction, error: ChoirError) -> tuple[str, Any]:
    """choird's refusal as a notification: message and severity."""
    if isinstance(error, UsageError) and "unknown operator verb" in error.message:
        return (
            f"{action.title} is not available in this choird (it has no {action.verb} verb): "
            "update choird to a version with it",
            "warning",
        )
    if isinstance(error, ConflictError):
        return error.message, "warning"
    return error.message, "error"
