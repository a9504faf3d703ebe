"""The Config tab: the staged config against the running one; load, apply, secret apply.

Each change carries choird's tag (`config.diff`): `hot-reload` changes reach running agents at
`config apply`, `restart-required` ones name the command that makes them take effect (§16, §17.6).
A load that finds problems stages nothing and lists every problem here, as `choirctl config load`
prints them. Applying and reloading secrets change what running agents see, so both ask first.
The tab re-reads `config.show`/`config.diff` on mount, after a resync and on `config` feed items
(someone applied elsewhere) — never on a timer. Its palette entries are the catalogue's
(`tui.actions`: config load, diff, apply; secret apply), which open this tab and act here.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static

from choir.errors import ChoirError, ConflictError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.dialogs import ConfirmDialog
from tui.messages import ConfigChanged, SecretsChanged
from tui.views.base import ChoirView

if TYPE_CHECKING:
    from choir.protocol.operator import answers as a
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")


NOTHING_STAGED: Final = (
    "Nothing staged. Edit config.json in $CHOIR_HOME, then press l to load and validate it "
    "(choirctl config load); the changes appear here before anything is applied."
)
NO_CHANGES: Final = "The staged config is the same as the running one: nothing to apply."
_SCOPE_STYLES: Final = {"hot-reload": "green", "restart-required": "bold yellow"}


class ConfigView(ChoirView):
    """Staged vs running; `l` loads, `a` applies, `s` reloads secrets, `f` re-reads."""

    VIEW_ID = "config"
    TITLE = "Config"

    DEFAULT_CSS = """
    ConfigView #config-summary { height: auto; padding: 0 1; text-style: bold; }
    ConfigView #config-problems { height: auto; max-height: 50%; padding: 0 1; display: none; }
    ConfigView #config-note { height: auto; padding: 0 2 1 2; color: $text-muted; }
    ConfigView #config-changes { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("l", "load", "Load"),
        Binding("a", "apply", "Apply"),
        Binding("s", "secret_apply", "Secret apply"),
        Binding("f", "refresh", "Refresh"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.shown: a.ConfigShown | None = None
        """The last `config.show` (version, hash, staged), without the config itself."""
        self.changes: list[a.ChangeView] = []
        """The staged changes (`config.diff`), empty when nothing is staged."""

    def compose(self) -> ComposeResult:
        yield Static("", id="config-summary", markup=False)
        yield Static("", id="config-problems", markup=False)
        yield Static(NOTHING_STAGED, id="config-note", markup=False)
        yield DataTable(id="config-changes", cursor_type="row", zebra_stripes=True)

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#config-changes", DataTable)

    def on_mount(self) -> None:
        self.table.add_columns("", "source", "path", "scope", "takes effect with")
        super().on_mount()
        self.refresh_config()

    def on_resynced(self) -> None:
        super().on_resynced()
        self.refresh_config()

    def on_config_changed(self, _: ConfigChanged) -> None:
        self.refresh_config()

    def on_secrets_changed(self, message: SecretsChanged) -> None:
        changed = ", ".join(message.data.changed) or "none"
        self.notify(f"secrets applied; changed: {changed}", title="secrets", markup=False)

    # drawing

    def redraw(self) -> None:
        shown = self.shown
        if not shown:
            summary = "running config: not read yet"
        else:
            staged = "a staged config is waiting" if shown.staged else "nothing staged"
            digest = shown.config_hash[:12]
            summary = f"running config v{shown.config_version} ({digest}) · {staged}"
        self.query_one("#config-summary", Static).update(summary)
        table = self.table
        table.clear()
        for change in self.changes:
            scope = change.scope
            table.add_row(
                change.op,
                change.source,
                change.path,
                Text(scope, _SCOPE_STYLES.get(scope, "")),
                change.action,
            )
        note = self.query_one("#config-note", Static)
        if not (shown and shown.staged):
            note.update(NOTHING_STAGED)
        elif not self.changes:
            note.update(NO_CHANGES)
        note.display = not self.changes

    def problems(self, header: str | None, errors: list[str], style: str = "red") -> None:
        """List a load's problems (or warnings) above the changes; none hides the list."""
        widget = self.query_one("#config-problems", Static)
        text = Text()
        if header:
            text.append(f"{header}\n", f"bold {style}")
        for problem in errors:
            text.append(f"  {problem}\n", style)
        widget.update(text)
        widget.display = bool(errors)

    # choird

    @work(group="config-read", exclusive=True)
    async def refresh_config(self) -> None:
        """Re-read `config.show` and, when something is staged, `config.diff`."""
        if not self.bridge.connected:
            return  # the resync reads it once connected
        try:
            shown: a.ConfigShown | None = await self.bridge.ask(
                OperatorVerb.CONFIG_SHOW, a.ConfigShown
            )
            changes = (
                (await self.bridge.ask(OperatorVerb.CONFIG_DIFF, a.ConfigChanges)).changes
                if shown and shown.staged
                else []
            )
        except ConflictError:  # unstaged meanwhile
            shown = self.shown.model_copy(update={"staged": False}) if self.shown else None
            changes = []
        except ChoirError:
            return  # not connected: the resync reads it again
        if shown is not None:
            shown = shown.model_copy(update={"config": {}})  # the view never shows it
        self.shown, self.changes = shown, changes
        if self.is_attached:  # the console may have closed while the call ran
            with contextlib.suppress(NoMatches):  # ...and already removed the widgets
                self.redraw()

    def action_refresh(self) -> None:
        self.refresh_config()

    def action_load(self) -> None:
        self.load()

    @work(group="config-act", exclusive=True)
    async def load(self) -> None:
        """`config.load`: validate $CHOIR_HOME and stage it, or list every problem."""
        try:
            answer = await self.bridge.ask(OperatorVerb.CONFIG_LOAD, a.ConfigLoaded)
        except ChoirError as error:
            self.notify(error.message, title="config load", severity="error", markup=False)
            return
        if not answer.staged:
            self.problems(answer.header, list(answer.errors or []))
            self.notify("config.json has problems: nothing staged", severity="error")
        else:
            self.problems("warnings", list(answer.warnings or []), "yellow")
            count = len(answer.changes or [])
            self.notify(f"config staged: {count} change(s); press a to apply", title="config")
        self.refresh_config()

    def action_apply(self) -> None:
        self.apply()

    @work(group="config-act", exclusive=True)
    async def apply(self) -> None:
        """Confirm, then `config.apply`: a new config_version, pushed to every active session."""
        if not (self.shown and self.shown.staged):
            self.notify("Nothing staged: press l to load config.json first.", severity="warning")
            return
        hot = sum(c.scope == "hot-reload" for c in self.changes)
        later = sorted({c.action for c in self.changes} - {"choirctl config apply"})
        detail = f"{hot} hot-reload change(s) reach running agents at once."
        if later:
            detail += "\nRestart-required changes then need: " + "; ".join(later)
        question = f"Apply the staged config ({len(self.changes)} change(s))?"
        if not await self.app.push_screen_wait(ConfirmDialog(question, detail, yes="Apply")):
            return
        try:
            applied = await self.bridge.ask(OperatorVerb.CONFIG_APPLY, a.ConfigApplied)
        except ConflictError as error:
            self.notify(f"{error.message}.", title="config apply", severity="warning", markup=False)
            self.refresh_config()
            return
        except ChoirError as error:
            self.notify(error.message, title="config apply", severity="error", markup=False)
            return
        pushed = len(applied.pushed)
        self.problems(None, [])
        self.notify(f"config v{applied.config_version} applied; told {pushed} session(s)")
        self.refresh_config()

    def action_secret_apply(self) -> None:
        self.secret_apply()

    @work(group="config-act", exclusive=True)
    async def secret_apply(self) -> None:
        """Confirm, then `secret.apply`: choird re-reads secrets.json (values never shown)."""
        question = "Reload secrets.json in choird?"
        detail = "Sessions using a secret that changed are told to fetch it again."
        if not await self.app.push_screen_wait(ConfirmDialog(question, detail, yes="Reload")):
            return
        try:
            secrets = await self.bridge.ask(OperatorVerb.SECRET_APPLY, a.SecretsApplied)
        except ChoirError as error:
            self.notify(error.message, title="secret apply", severity="error", markup=False)
            return
        if not secrets.applied:
            self.problems("secrets.json was not applied", list(secrets.errors or []))
            return
        changed = ", ".join(secrets.changed or []) or "none"
        self.notify(f"{secrets.secrets} secret(s) served; changed: {changed}", markup=False)
