"""All-or-nothing file system changes: a failed multi-step command leaves no trace.

`choirctl init` and `agent init` create directories, repositories and files in several steps.
Each step registers how to undo itself; if a later step raises, the undo actions run in reverse
and the home is left as it was.
"""

from __future__ import annotations

import contextlib
import shutil
import stat
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from types import TracebackType

from choir.config.atomic import atomic_write


def _first_missing(path: Path) -> Path | None:
    """The outermost ancestor of `path` (or `path` itself) that does not exist yet."""
    missing = None
    for candidate in (path, *path.parents):
        if candidate.exists():
            break
        missing = candidate
    return missing


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


class Rollback:
    """A context manager collecting undo actions; they run only when the block raises."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def __enter__(self) -> Rollback:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if error is None:
            return
        for undo in reversed(self._undo):
            with contextlib.suppress(OSError):
                undo()

    def on_failure(self, undo: Callable[[], None]) -> None:
        self._undo.append(undo)

    def guard_dirs(self, paths: Iterable[Path]) -> None:
        """Before someone else creates `paths`: remove new ones, restore modes of old ones."""
        for path in paths:
            if path.exists():
                mode = stat.S_IMODE(path.stat().st_mode)
                self.on_failure(partial(path.chmod, mode))
            elif (top := _first_missing(path)) is not None:
                self.on_failure(partial(_remove, top))

    def make_dirs(self, path: Path, mode: int = 0o777) -> None:
        """`path` and its missing parents; `path` itself created with `mode` (umask applies)."""
        self.guard_dirs([path])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=mode, exist_ok=True)

    def write(self, path: Path, data: bytes, mode: int) -> None:
        """Write atomically; on failure restore the previous content, or remove a new file."""
        if path.exists():
            old, old_mode = path.read_bytes(), stat.S_IMODE(path.stat().st_mode)
            self.on_failure(lambda: atomic_write(path, old, old_mode))
        else:
            self.on_failure(lambda: path.unlink(missing_ok=True))
        atomic_write(path, data, mode)

    def install_dir(self, staged: Path, final: Path) -> None:
        """Move a fully built directory into place; `final` must be absent or empty."""
        if final.exists():
            final.rmdir()
            self.on_failure(final.mkdir)
        staged.rename(final)
        self.on_failure(lambda: _remove(final))
