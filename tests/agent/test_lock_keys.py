"""Lock keys name where a path really is (§9.2): one file, one key; a directory covers its files.

Through the real arbiter, real workspace and real tools: a symlink and its target, a path
through a symlinked directory, a dangling symlink a write will create, a symlink into
`.choirtmp/`, and a directory search against a write of a file under it — each pair must
serialize (before, each got a lexical key of its own and ran at the same time).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.agent.kernel.dispatch import prepare_call
from choir.agent.kernel.workspace import PathOutsideWorkspace
from choir.agent.wiring import Kernel, open_kernel
from tests.agent.test_arbiter import UNIMPLEMENTED, call, limits, make_root, until_held

SLOW_MS = 400


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[Kernel]:
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / "notes.txt").write_text("hello\n")
    (ws / "alias.txt").symlink_to("notes.txt")
    (ws / "lib").symlink_to("src/pkg")
    (ws / "dangling").symlink_to("src/new.py")
    (ws / "send").symlink_to(".choirtmp/send")
    (tmp_path / "outside").mkdir()
    (ws / "out").symlink_to("../outside")
    async with open_kernel(
        make_root(tmp_path), ws, limits=limits(), runtime_tools=UNIMPLEMENTED
    ) as k:
        for job in ("a", "b"):
            assert k.arbiter.policy.start_job(job) is None
        yield k


def keys(kernel: Kernel, tool: str, **arguments: object) -> list[str]:
    registered = kernel.registry.get(tool)
    assert registered is not None
    prepared = prepare_call(registered, dict(arguments), kernel.workspace)
    assert not hasattr(prepared, "status"), prepared
    return [f"{r}:{m}" for r, m in prepared.lockset]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("tool", "path", "key"),
    [
        ("choir.fs.read", "alias.txt", "file:notes.txt:S"),
        ("choir.fs.read", "/workspace/alias.txt", "file:notes.txt:S"),
        ("choir.fs.read", "lib/mod.py", "file:src/pkg/mod.py:S"),
        ("choir.fs.write", "lib/new/deeper.py", "file:src/pkg/new/deeper.py:X"),
        ("choir.fs.write", "lib/missing/../mod.py", "file:src/pkg/mod.py:X"),
        ("choir.fs.write", "dangling", "file:src/new.py:X"),
        ("choir.fs.write", "send/a.txt", "choirtmp:X"),
        ("choir.fs.search", "lib", "file:src/pkg:S"),
        ("choir.fs.search", ".", "file:.:S"),
    ],
)
def test_keys_follow_symlinks_inside_the_workspace(
    kernel: Kernel, tool: str, path: str, key: str
) -> None:
    arguments: dict[str, object] = {"path": path}
    if tool == "choir.fs.write":
        arguments |= {"op": "overwrite", "content": ""}
    if tool == "choir.fs.search":
        arguments |= {"pattern": "x"}
    assert keys(kernel, tool, **arguments) == [key]


@pytest.mark.parametrize("path", ["out/secret.txt", "out", "../x", "/etc/passwd", "src/../../x"])
def test_a_key_that_would_leave_the_workspace_is_refused(kernel: Kernel, path: str) -> None:
    registered = kernel.registry.get("choir.fs.read")
    assert registered is not None
    refused = prepare_call(registered, {"path": path}, kernel.workspace)
    assert getattr(refused, "error_code", None) == PathOutsideWorkspace.error_code


async def _overlap(kernel: Kernel, first: str, second: str) -> float:
    """Run the slow writer on `first` (core:a) and then on `second` (core:b); seconds taken."""
    started = time.monotonic()
    results = await asyncio.gather(
        kernel.arbiter.propose(
            call("core:a", "test.slow_write", path=first, sleep_ms=SLOW_MS, text="a")
        ),
        kernel.arbiter.propose(
            call("core:b", "test.slow_write", path=second, sleep_ms=SLOW_MS, text="b")
        ),
    )
    assert [r.status for r in results] == ["success", "success"], results
    return time.monotonic() - started


async def test_writes_through_a_symlink_and_to_its_target_serialize(kernel: Kernel) -> None:
    await _overlap(kernel, "warm-a.txt", "warm-b.txt")  # python start-up, off the clock
    assert await _overlap(kernel, "alias.txt", "notes.txt") >= 2 * SLOW_MS / 1000
    assert (kernel.workspace.root / "notes.txt").read_text() in ("hello\na\nb\n", "hello\nb\na\n")


async def test_a_directory_lock_covers_the_files_under_it(kernel: Kernel) -> None:
    await _overlap(kernel, "warm-a.txt", "warm-b.txt")
    holder = asyncio.create_task(
        kernel.arbiter.propose(
            call("core:a", "test.slow_write", path="src/pkg/mod.py", sleep_ms=SLOW_MS)
        )
    )
    await until_held(kernel, "core:a")
    started = time.monotonic()
    found = await kernel.arbiter.propose(call("core:b", "choir.fs.search", pattern="x", path="src"))
    assert time.monotonic() - started >= (SLOW_MS - 150) / 1000  # waited for the write
    assert holder.done()
    assert found.status == "success"
    assert found.data["match_count"] == 2  # "x = 1" and the appended "x": the write is whole


async def test_a_call_whose_symlink_moved_while_it_waited_takes_the_new_key(
    kernel: Kernel,
) -> None:
    root = kernel.workspace.root
    (root / "other.txt").write_text("other\n")
    relink = "sleep 0.3 && ln -sfn other.txt alias.txt"
    moving = asyncio.create_task(
        kernel.arbiter.propose(call("core:a", "choir.exec", command=relink, timeout_ms=5000))
    )
    await until_held(kernel, "core:a")  # exec holds workspace:X: the write waits, file:notes.txt
    write = call("core:b", "choir.fs.write", path="alias.txt", op="append", content="more\n")
    result = await kernel.arbiter.propose(write)
    assert (await moving).status == "success"
    assert result.status == "success"
    [intent] = [
        e
        for e in kernel.log
        if e.kind == "tool_call_committed" and e.event["call_id"] == write.call_id
    ]
    assert intent.event["locks"] == [{"resource": "file:other.txt", "mode": "X"}]
    assert (root / "other.txt").read_text() == "other\nmore\n"
