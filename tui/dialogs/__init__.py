"""Modal dialogs that return typed results: a yes/no question and a one-line text prompt.

Push one with `app.push_screen(dialog, callback)` or, inside a worker, `await
app.push_screen_wait(dialog)`; the result is the dismissal value (`bool`, `str | None`).
"""

from __future__ import annotations

from tui.dialogs.confirm import ConfirmDialog
from tui.dialogs.prompt import TextPrompt

__all__ = ["ConfirmDialog", "TextPrompt"]
