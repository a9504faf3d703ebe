"""choir.fs.read, choir.fs.write and choir.fs.search on a real filesystem with the real rg."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest

from choir.agent.kernel.workspace import PathOutsideWorkspace, Workspace
from choir.agent.tools import _caps
from choir.agent.tools.builtin import BUILTIN_TOOLS
from choir.agent.tools.fs import read as fs_read
from choir.agent.tools.fs import search as fs_search
from choir.agent.tools.fs import write as fs_write
from choir.agent.tools.fs.read import FsReadInput
from choir.agent.tools.fs.search import FsSearchInput
from choir.agent.tools.fs.write import FsWriteInput
from choir.agent.tools.rg_json import Match, RgStream
from choir.protocol.tooling.tools import ToolResult

SEEDS_TOOLS = Path(__file__).parents[2] / "seeds" / "global" / "tools"
needs_rg = pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("import os\n\ndef main():\n    return 1\n")
    (root / "src" / "util.py").write_text("def helper():\n    return 'Main'\n")
    (root / "README.md").write_text("# demo\nmain entry is src/app.py\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("main secret\n")
    with Workspace(root) as workspace:
        yield workspace


def _no_host_path(result: ToolResult, ws: Workspace) -> None:
    assert str(ws.root.parent) not in result.model_dump_json()


async def read(ws: Workspace, **kwargs: Any) -> ToolResult:
    return await fs_read.run(ws, FsReadInput(**kwargs))


async def write(ws: Workspace, **kwargs: Any) -> ToolResult:
    return await fs_write.run(ws, FsWriteInput(**kwargs))


async def search(ws: Workspace, **kwargs: Any) -> ToolResult:
    return await fs_search.run(ws, FsSearchInput(**kwargs))


def test_registry_names_and_lock_keys() -> None:
    assert set(BUILTIN_TOOLS) == {
        "choir.fs.read",
        "choir.fs.write",
        "choir.fs.search",
        "choir.exec",
    }
    assert fs_read.lock_keys(FsReadInput(path="./src//a.py")) == [("file:src/a.py", "S")]
    assert fs_write.lock_keys(FsWriteInput(path="a/../b", op="append", content="")) == [
        ("file:b", "X")
    ]
    assert fs_search.lock_keys(FsSearchInput(pattern="x")) == [("file:.", "S")]
    sent = FsWriteInput(path=".choirtmp/send/a.txt", op="overwrite", content="")
    assert fs_write.lock_keys(sent) == [("file:.choirtmp/send/a.txt", "X")]  # dispatch locates
    with pytest.raises(PathOutsideWorkspace):
        fs_read.lock_keys(FsReadInput(path="../x"))


# -- choir.fs.read


async def test_read_whole_file(ws: Workspace) -> None:
    result = await read(ws, path="src/app.py")
    assert result.status == "success"
    assert result.data["content"] == "import os\n\ndef main():\n    return 1\n"
    assert (result.data["start_line"], result.data["end_line"]) == (1, 4)
    assert result.data["total_lines"] == 4
    assert not result.truncated


@pytest.mark.parametrize(
    ("kwargs", "content", "first"),
    [
        ({"mode": "head", "lines": 2}, "import os\n\n", 1),
        ({"mode": "tail", "lines": 2}, "def main():\n    return 1\n", 3),
        ({"mode": "tail", "lines": 50}, "import os\n\ndef main():\n    return 1\n", 1),
        ({"mode": "range", "start_line": 2, "end_line": 3}, "\ndef main():\n", 2),
        ({"mode": "range", "start_line": 4}, "    return 1\n", 4),
        ({"mode": "range", "start_line": 3, "end_line": 99}, "def main():\n    return 1\n", 3),
    ],
)
async def test_read_modes(ws: Workspace, kwargs: dict[str, Any], content: str, first: int) -> None:
    result = await read(ws, path="src/app.py", **kwargs)
    assert result.data["content"] == content
    assert result.data["start_line"] == first


async def test_read_chunks_a_big_file(ws: Workspace) -> None:
    (ws.root / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 5001)))
    first = await read(ws, path="big.txt")
    assert first.truncated
    assert first.data["end_line"] == _caps.READ_MAX_LINES
    assert first.data["next_start_line"] == _caps.READ_MAX_LINES + 1
    assert first.data["total_lines"] == 5000
    nxt = await read(ws, path="big.txt", mode="range", start_line=first.data["next_start_line"])
    assert nxt.data["content"].startswith(f"line {_caps.READ_MAX_LINES + 1}\n")


async def test_read_caps_bytes_and_cuts_huge_lines(ws: Workspace) -> None:
    (ws.root / "wide.txt").write_text(("x" * 3000 + "\n") * 100)
    (ws.root / "minified.js").write_text("y" * 100_000)
    wide = await read(ws, path="wide.txt")
    assert wide.truncated
    assert len(wide.data["content"].encode()) <= _caps.READ_MAX_BYTES
    assert wide.data["next_start_line"] == wide.data["end_line"] + 1
    minified = await read(ws, path="minified.js")
    assert minified.data["cut_lines"] == [1]
    assert len(minified.data["content"]) == _caps.LINE_MAX_CHARS


@pytest.mark.parametrize(
    ("name", "payload", "code"),
    [
        ("image.png", b"\x89PNG\r\n\x1a\n\0\0\0", "binary_file"),
        ("latin1.txt", "caf\xe9 au lait\n".encode("latin-1"), "binary_file"),
    ],
)
async def test_read_refuses_binary_files(
    ws: Workspace, name: str, payload: bytes, code: str
) -> None:
    (ws.root / name).write_bytes(payload)
    result = await read(ws, path=name)
    assert (result.status, result.error_code) == ("error", code)
    assert name in result.summary


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"path": "nope.txt"}, "not_found"),
        ({"path": "src"}, "is_a_directory"),
        ({"path": "../outside/secret.txt"}, "path_outside_workspace"),
        ({"path": "src/app.py", "mode": "range"}, "invalid_input"),
        ({"path": "src/app.py", "mode": "range", "start_line": 3, "end_line": 2}, "invalid_input"),
        ({"path": "src/app.py", "mode": "range", "start_line": 9}, "range_beyond_eof"),
    ],
)
async def test_read_failures_are_results(ws: Workspace, kwargs: dict[str, Any], code: str) -> None:
    result = await read(ws, **kwargs)
    assert (result.status, result.error_code) == ("error", code)
    _no_host_path(result, ws)


class CountingExecutor(ThreadPoolExecutor):
    """The loop's default executor, counting what is handed to its threads."""

    handed = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.handed += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
async def executor() -> CountingExecutor:
    """Installed as the running loop's default executor (the test's own loop)."""
    counting = CountingExecutor(max_workers=1)
    asyncio.get_running_loop().set_default_executor(counting)
    return counting


async def test_a_small_file_is_read_on_the_loop_and_a_large_one_in_a_thread(
    ws: Workspace, executor: CountingExecutor
) -> None:
    small = "x" * 99 + "\n"
    (ws.root / "small.txt").write_text(small * (fs_read.INLINE_MAX_BYTES // len(small)))
    (ws.root / "large.txt").write_text(small * (fs_read.INLINE_MAX_BYTES // len(small) + 1))
    inline = await read(ws, path="small.txt", mode="tail", lines=1)
    assert (inline.status, inline.data["content"], executor.handed) == ("success", small, 0)
    threaded = await read(ws, path="large.txt", mode="tail", lines=1)
    assert (threaded.status, threaded.data["content"], executor.handed) == ("success", small, 1)
    failed = await read(ws, path="nope.txt")
    assert (failed.error_code, executor.handed) == ("not_found", 1)


async def test_read_refuses_a_fifo_without_blocking(ws: Workspace) -> None:
    os.mkfifo(ws.root / "pipe")
    result = await read(ws, path="pipe")
    assert result.error_code == "not_a_file"


async def test_read_refuses_symlink_escapes(ws: Workspace) -> None:
    (ws.root / "leak").symlink_to("../outside/secret.txt")
    result = await read(ws, path="leak")
    assert result.error_code == "path_outside_workspace"
    assert result.summary == "path outside workspace: leak"
    _no_host_path(result, ws)


# -- choir.fs.write


async def test_overwrite_creates_file_and_parents(ws: Workspace) -> None:
    result = await write(ws, path="docs/new/guide.md", op="overwrite", content="one\ntwo\n")
    assert result.status == "success"
    assert result.data == {
        "path": "docs/new/guide.md", "op": "overwrite", "created": True,
        "lines_before": None, "lines_after": 2, "bytes_written": 8,
    }  # fmt: skip
    assert (ws.root / "docs" / "new" / "guide.md").read_text() == "one\ntwo\n"


@pytest.mark.parametrize(
    ("kwargs", "expected", "after"),
    [
        ({"op": "overwrite", "content": "x\n"}, "x\n", 1),
        ({"op": "append", "content": "d\n"}, "a\nb\nc\nd\n", 4),
        ({"op": "replace_range", "start_line": 2, "end_line": 2, "content": "B\n"}, "a\nB\nc\n", 3),
        ({"op": "replace_range", "start_line": 1, "end_line": 2, "content": ""}, "c\n", 1),
        ({"op": "replace_range", "start_line": 2, "end_line": 3, "content": "Z"}, "a\nZ", 2),
        (
            {"op": "replace_range", "start_line": 1, "end_line": 1, "content": "1\n2"},
            "1\n2\nb\nc\n",
            4,
        ),
        ({"op": "insert_at", "line": 1, "content": "0\n"}, "0\na\nb\nc\n", 4),
        ({"op": "insert_at", "line": 3, "content": "bb"}, "a\nb\nbb\nc\n", 4),
        ({"op": "insert_at", "line": 4, "content": "d\n"}, "a\nb\nc\nd\n", 4),
    ],
)
async def test_write_ops(ws: Workspace, kwargs: dict[str, Any], expected: str, after: int) -> None:
    (ws.root / "f.txt").write_text("a\nb\nc\n")
    result = await write(ws, path="f.txt", **kwargs)
    assert result.status == "success", result.summary
    assert (ws.root / "f.txt").read_text() == expected
    assert (result.data["lines_before"], result.data["lines_after"]) == (3, after)
    assert result.data["bytes_written"] == len(expected.encode())


async def test_insert_after_a_last_line_without_newline(ws: Workspace) -> None:
    (ws.root / "f.txt").write_text("a\nb")
    await write(ws, path="f.txt", op="insert_at", line=3, content="c\n")
    assert (ws.root / "f.txt").read_text() == "a\nb\nc\n"


@pytest.mark.parametrize(
    ("kwargs", "code", "says"),
    [
        (
            {"op": "replace_range", "start_line": 2, "end_line": 4},
            "range_beyond_eof",
            "end_line 4 is past the end of f.txt (3 lines)",
        ),
        (
            {"op": "replace_range", "start_line": 3, "end_line": 2},
            "invalid_input",
            "end_line must not be before start_line",
        ),
        (
            {"op": "replace_range", "start_line": 1},
            "invalid_input",
            "op 'replace_range' needs start_line and end_line",
        ),
        ({"op": "insert_at", "line": 5}, "range_beyond_eof", "line 5 is past the end of f.txt"),
        ({"op": "insert_at"}, "invalid_input", "op 'insert_at' needs line"),
    ],
)
async def test_write_range_errors(
    ws: Workspace, kwargs: dict[str, Any], code: str, says: str
) -> None:
    (ws.root / "f.txt").write_text("a\nb\nc\n")
    result = await write(ws, path="f.txt", content="x\n", **kwargs)
    assert (result.status, result.error_code) == ("error", code)
    assert says in result.summary
    assert (ws.root / "f.txt").read_text() == "a\nb\nc\n"


async def test_range_edit_of_a_missing_file_says_how_to_create_it(ws: Workspace) -> None:
    result = await write(ws, path="new/x.txt", op="insert_at", line=1, content="a")
    assert result.error_code == "not_found"
    assert "overwrite" in result.summary
    assert not (ws.root / "new").exists()


async def test_a_small_write_runs_on_the_loop_and_a_large_one_in_a_thread(
    ws: Workspace, executor: CountingExecutor
) -> None:
    line = "x" * 99 + "\n"
    small = line * (fs_write.INLINE_MAX_BYTES // len(line))
    inline = await write(ws, path="a.txt", op="overwrite", content=small)
    assert (inline.status, executor.handed) == ("success", 0)
    appended = await write(ws, path="a.txt", op="append", content=line * 2)
    assert (appended.data["lines_after"], executor.handed) == (small.count("\n") + 2, 0)
    # the old file is now over the bound: found before it is read, and the write goes to a
    # thread from the start (nothing was written by the inline attempt)
    again = await write(ws, path="a.txt", op="append", content=line)
    assert (again.data["lines_before"], again.data["lines_after"], executor.handed) == (
        small.count("\n") + 2,
        small.count("\n") + 3,
        1,
    )
    large = await write(ws, path="b.txt", op="overwrite", content=small + line)
    assert (large.status, executor.handed) == ("success", 2)
    assert (ws.root / "a.txt").read_text() == small + line * 3
    assert (ws.root / "b.txt").read_text() == small + line
    failed = await write(ws, path="nope.txt", op="insert_at", line=1, content=line)
    assert (failed.error_code, executor.handed) == ("not_found", 2)
    assert not [p.name for p in ws.root.iterdir() if p.name.startswith(".choir-write-")]


async def test_write_is_atomic_and_keeps_mode(ws: Workspace) -> None:
    script = ws.root / "run.sh"
    script.write_text("#!/bin/sh\necho old\n")
    script.chmod(0o751)
    inode = script.stat().st_ino
    result = await write(ws, path="run.sh", op="replace_range", start_line=2, end_line=2,
                         content="echo new\n")  # fmt: skip
    assert result.status == "success"
    assert script.read_text() == "#!/bin/sh\necho new\n"
    assert script.stat().st_mode & 0o7777 == 0o751
    assert script.stat().st_ino != inode, "replaced by rename, not rewritten in place"
    assert sorted(p.name for p in ws.root.iterdir()) == ["README.md", "run.sh", "src"]


async def test_write_through_an_inside_symlink_keeps_the_link(ws: Workspace) -> None:
    (ws.root / "main.py").symlink_to("src/app.py")
    await write(ws, path="main.py", op="append", content="# end\n")
    assert (ws.root / "main.py").is_symlink()
    assert (ws.root / "src" / "app.py").read_text().endswith("return 1\n# end\n")


async def test_write_refuses_escapes_and_writes_nothing_outside(ws: Workspace) -> None:
    outside = ws.root.parent / "outside"
    (ws.root / "leak").symlink_to("../outside")
    for path in ("../outside/x.txt", "leak/x.txt", "/tmp/x.txt", "a\0b"):
        result = await write(ws, path=path, op="overwrite", content="pwned")
        assert result.error_code == "path_outside_workspace"
        assert result.summary == f"path outside workspace: {path}"
        _no_host_path(result, ws)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_write_edits_refuse_binary_but_overwrite_replaces_it(ws: Workspace) -> None:
    (ws.root / "blob.bin").write_bytes(b"\xff\xfe\0\x01")
    result = await write(ws, path="blob.bin", op="append", content="x")
    assert result.error_code == "binary_file"
    result = await write(ws, path="blob.bin", op="overwrite", content="text\n")
    assert result.status == "success"
    assert (ws.root / "blob.bin").read_text() == "text\n"


async def test_write_to_a_directory_fails(ws: Workspace) -> None:
    result = await write(ws, path="src", op="overwrite", content="x")
    assert result.error_code == "is_a_directory"


# -- choir.fs.search


@needs_rg
async def test_search_finds_matches_with_workspace_paths(ws: Workspace) -> None:
    result = await search(ws, pattern=r"def \w+")
    assert result.status == "success"
    assert sorted((m["path"], m["line_number"], m["line"]) for m in result.data["matches"]) == [
        ("src/app.py", 3, "def main():"),
        ("src/util.py", 1, "def helper():"),
    ]
    assert result.data["file_count"] == 2
    assert not result.truncated


@needs_rg
async def test_search_in_a_subdirectory_and_a_file(ws: Workspace) -> None:
    in_dir = await search(ws, pattern="return", path="src")
    assert {m["path"] for m in in_dir.data["matches"]} == {"src/app.py", "src/util.py"}
    in_file = await search(ws, pattern="return", path="/workspace/src/util.py")
    assert in_file.data["matches"] == [
        {"path": "src/util.py", "line_number": 2, "line": "    return 'Main'"}
    ]


@needs_rg
async def test_search_case_and_glob(ws: Workspace) -> None:
    sensitive = await search(ws, pattern="main")
    assert {m["path"] for m in sensitive.data["matches"]} == {"src/app.py", "README.md"}
    insensitive = await search(ws, pattern="main", case_sensitive=False, glob="*.py")
    assert {m["path"] for m in insensitive.data["matches"]} == {"src/app.py", "src/util.py"}


@needs_rg
async def test_search_without_matches(ws: Workspace) -> None:
    result = await search(ws, pattern="zebra")
    assert (result.status, result.data["match_count"]) == ("success", 0)
    assert "no matches" in result.summary


@needs_rg
async def test_search_caps_results(ws: Workspace) -> None:
    (ws.root / "many.txt").write_text("hit\n" * 50)
    result = await search(ws, pattern="hit", max_results=3)
    assert result.truncated
    assert [m["line_number"] for m in result.data["matches"]] == [1, 2, 3]


@needs_rg
async def test_search_never_follows_symlinks_out(ws: Workspace) -> None:
    (ws.root / "src" / "leak").symlink_to("../../outside")
    (ws.root / "leakfile").symlink_to("../outside/secret.txt")
    result = await search(ws, pattern="secret")
    assert result.data["matches"] == []
    for path in ("src/leak", "leakfile", "../outside", "/etc"):
        refused = await search(ws, pattern="secret", path=path)
        assert refused.error_code == "path_outside_workspace"
        _no_host_path(refused, ws)


@needs_rg
async def test_search_reports_bad_patterns_and_paths(ws: Workspace) -> None:
    bad = await search(ws, pattern="(")
    assert bad.error_code == "search_failed"
    assert "regex" in bad.summary
    missing = await search(ws, pattern="x", path="nope")
    assert missing.error_code == "not_found"


def test_rg_stream_joins_chunks_and_decodes_byte_paths() -> None:
    stream = RgStream(limit=5)
    raw_path = base64.b64encode(b"caf\xe9.txt").decode()
    message = {"type": "match", "data": {"path": {"bytes": raw_path}, "lines": {"text": "hit\r\n"}}}
    line = orjson.dumps({**message, "data": {**message["data"], "line_number": 7}})
    begin = orjson.dumps({"type": "begin", "data": {"path": {"text": "x"}}})
    payload = begin + b"\n" + line + b"\n"
    for start in range(0, len(payload), 10):
        stream.feed(payload[start : start + 10])
    assert stream.matches == [Match("caf\ufffd.txt", 7, "hit")]
    assert not stream.truncated


@pytest.mark.parametrize("name", sorted(BUILTIN_TOOLS))
def test_input_models_agree_with_the_seed_manifests(name: str) -> None:
    """The model sees the manifest; the runtime parses with the input model: they must agree."""
    manifest = orjson.loads((SEEDS_TOOLS / f"{name}.json").read_bytes())
    schema = manifest["llm"]["parameters"]
    fields = BUILTIN_TOOLS[name].input_model.model_fields
    assert set(schema["properties"]) == set(fields)
    assert set(schema["required"]) == {key for key, field in fields.items() if field.is_required()}
    for key, prop in schema["properties"].items():
        if "default" in prop:
            assert fields[key].default == prop["default"], key
