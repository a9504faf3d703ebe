"""Workspace confinement against the real filesystem, with openat2 and with the component walk."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from choir.agent.kernel.workspace import (
    PathOutsideWorkspace,
    Workspace,
    normalize,
    openat2_supported,
)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace holding a secret no tool may reach."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret\n")
    return path


@pytest.fixture(params=["openat2", "walk"])
def ws(request: pytest.FixtureRequest, tmp_path: Path, outside: Path) -> Iterator[Workspace]:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("print('hi')\n")
    (root / "notes.txt").write_text("hello\n")
    use_openat2 = request.param == "openat2"
    if use_openat2 and not openat2_supported(os.open(root, os.O_PATH)):
        pytest.skip("openat2 is not available on this kernel")
    with Workspace(root, use_openat2=use_openat2) as workspace:
        yield workspace


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("a/b", "a/b"),
        ("./a//b/", "a/b"),
        ("a/./b/../c", "a/c"),
        ("a/..", "."),
        ("", "."),
        (".", "."),
        ("/workspace", "."),
        ("/workspace/", "."),
        ("/workspace/src/x.py", "src/x.py"),
        (".choirtmp/send/a.ogg", ".choirtmp/send/a.ogg"),
    ],
)
def test_normalize_gives_the_canonical_relative_path(given: str, canonical: str) -> None:
    assert normalize(given) == canonical


@pytest.mark.parametrize(
    "given",
    ["..", "../x", "a/../../x", "/etc/passwd", "/", "/workspacex/a", "/workspace/../etc", "a\0b"],
)
def test_normalize_refuses_escapes_with_the_path_as_given(given: str) -> None:
    with pytest.raises(PathOutsideWorkspace) as caught:
        normalize(given)
    assert str(caught.value) == f"path outside workspace: {given}"
    assert caught.value.error_code == "path_outside_workspace"


def _plant(ws: Workspace, outside: Path) -> None:
    """Symlinks of every escaping kind, inside the workspace."""
    root = ws.root
    (root / "etc_link").symlink_to("/etc")
    (root / "out_rel").symlink_to("../outside")
    (root / "out_file").symlink_to(outside / "secret.txt")
    (root / "src" / "up").symlink_to("../..")
    (root / "src" / "upup").symlink_to("../../..")
    (root / "loop_a").symlink_to("loop_b")
    (root / "loop_b").symlink_to("loop_a")
    (root / "self").symlink_to("self")
    (root / "abs_inside").symlink_to(root / "notes.txt")
    (root / "dangling_out").symlink_to("../outside/new.txt")


@pytest.mark.parametrize(
    "path",
    [
        "etc_link/passwd",
        "etc_link",
        "out_rel/secret.txt",
        "out_file",
        "src/upup/outside/secret.txt",
        "loop_a",
        "self/x",
        "abs_inside",
        "dangling_out",
    ],
)
def test_escaping_symlinks_are_refused(ws: Workspace, outside: Path, path: str) -> None:
    _plant(ws, outside)
    with pytest.raises(PathOutsideWorkspace) as caught:
        ws.open_file(path)
    assert str(caught.value) == f"path outside workspace: {path}"
    assert str(ws.root.parent) not in str(caught.value)


def test_creating_through_a_symlink_to_outside_creates_nothing(
    ws: Workspace, outside: Path
) -> None:
    _plant(ws, outside)
    with pytest.raises(PathOutsideWorkspace):
        ws.open_file("dangling_out", os.O_WRONLY | os.O_CREAT)
    with pytest.raises(PathOutsideWorkspace):
        ws.open_dir("out_rel/newdir", create=True)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_symlinks_that_stay_inside_are_followed(ws: Workspace) -> None:
    (ws.root / "link").symlink_to("src/pkg")
    (ws.root / "src" / "back").symlink_to("../notes.txt")
    (ws.root / "src" / "up").symlink_to("..")
    assert ws.read_text("link/mod.py") == "print('hi')\n"
    assert ws.read_text("src/back") == "hello\n"
    assert ws.read_text("src/up/src/up/notes.txt") == "hello\n"
    assert ws.resolve("link/mod.py") == "src/pkg/mod.py"
    assert ws.resolve("src/back") == "notes.txt"
    assert ws.resolve("src/up") == "."


@pytest.mark.parametrize(
    ("given", "located"),
    [
        ("notes.txt", "notes.txt"),
        ("new/dir/file.txt", "new/dir/file.txt"),
        ("notes.txt/below", "notes.txt/below"),
        ("link/mod.py", "src/pkg/mod.py"),
        ("link/new/x.py", "src/pkg/new/x.py"),
        ("link/missing/../mod.py", "src/pkg/mod.py"),
        ("chain", "src/pkg/mod.py"),
        ("dangling", "src/future.py"),
        ("src/up/notes.txt", "notes.txt"),
        ("/workspace/link", "src/pkg"),
        (".", "."),
    ],
)
def test_locate_names_where_a_path_really_is(ws: Workspace, given: str, located: str) -> None:
    (ws.root / "link").symlink_to("src/pkg")
    (ws.root / "chain").symlink_to("link/mod.py")
    (ws.root / "dangling").symlink_to("src/future.py")
    (ws.root / "src" / "up").symlink_to("..")
    assert ws.locate(given) == located


@pytest.mark.parametrize("path", ["etc_link/passwd", "out_rel/x", "loop_a", "dangling_out", "../x"])
def test_locate_refuses_what_leaves_the_workspace(ws: Workspace, outside: Path, path: str) -> None:
    _plant(ws, outside)
    with pytest.raises(PathOutsideWorkspace):
        ws.locate(path)


def test_paths_are_relative_and_the_container_alias_works(ws: Workspace) -> None:
    assert ws.read_text("notes.txt") == "hello\n"
    assert ws.read_text("/workspace/notes.txt") == "hello\n"
    assert ws.read_text("src/../notes.txt") == "hello\n"
    assert ws.stat("src").st_size > 0
    with pytest.raises(FileNotFoundError):
        ws.open_file("missing.txt")


def test_an_opened_directory_stays_put_when_swapped_for_a_symlink(
    ws: Workspace, outside: Path
) -> None:
    """The race: a directory replaced by a symlink to outside after it was opened."""
    dir_fd, name = ws.open_parent("src/new.txt")
    try:
        os.rename(ws.root / "src", ws.root / "src.old")
        (ws.root / "src").symlink_to(outside)
        with pytest.raises(PathOutsideWorkspace):
            ws.open_file("src/secret.txt")
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        os.close(fd)
    finally:
        os.close(dir_fd)
    assert (ws.root / "src.old" / "new.txt").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_a_final_name_swapped_for_a_symlink_is_not_followed(ws: Workspace, outside: Path) -> None:
    dir_fd, name = ws.open_parent("notes.txt")
    try:
        (ws.root / "notes.txt").unlink()
        (ws.root / "notes.txt").symlink_to(outside / "secret.txt")
        with pytest.raises(OSError, match="Too many levels of symbolic links"):
            os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def test_open_dir_creates_missing_directories_confined(ws: Workspace) -> None:
    (ws.root / "link").symlink_to("src")
    fd = ws.open_dir("link/a/b", create=True)
    try:
        assert os.listdir(fd) == []
    finally:
        os.close(fd)
    assert (ws.root / "src" / "a" / "b").is_dir()


def test_open_parent_resolves_symlinks_to_a_plain_entry(ws: Workspace) -> None:
    (ws.root / "alias.py").symlink_to("src/pkg/mod.py")
    dir_fd, name = ws.open_parent("alias.py")
    try:
        assert name == "mod.py"
        assert "mod.py" in os.listdir(dir_fd)
    finally:
        os.close(dir_fd)
    with pytest.raises(IsADirectoryError):
        ws.open_parent(".")


def test_ensure_choirtmp_creates_send_and_recv(ws: Workspace) -> None:
    ws.ensure_choirtmp()
    ws.ensure_choirtmp()
    assert (ws.root / ".choirtmp" / "send").is_dir()
    assert (ws.root / ".choirtmp" / "recv").is_dir()
