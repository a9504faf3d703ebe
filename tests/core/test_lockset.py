"""Lock keys, owners and canonical locksets (§9.2, §9.3, §7.3)."""

from __future__ import annotations

import pytest

from choir.core.locks.lockset import (
    KIND_FILE,
    KIND_INDEPENDENT,
    KIND_WORKSPACE,
    LockKeyError,
    LockRequest,
    Lockset,
    check_owner,
    key_kind,
)
from choir.errors import ExitCode


def test_lockset_is_sorted_and_deduplicated() -> None:
    lockset = Lockset.of("workspace:S", "choirtmp:X", "file:b.py:S", "file:a.py:S", "choirtmp:X")

    assert [f"{r}:{m}" for r, m in lockset] == [
        "choirtmp:X",
        "file:a.py:S",
        "file:b.py:S",
        "workspace:S",
    ]


@pytest.mark.parametrize(
    "locks",
    [("file:a.py:S", "file:a.py:X"), ("file:a.py:X", "file:a.py:S")],
    ids=["S-then-X", "X-then-S"],
)
def test_exclusive_wins_over_shared_for_the_same_resource(locks: tuple[str, str]) -> None:
    assert Lockset.of(*locks).requests == (LockRequest("file:a.py", "X"),)


def test_equal_locksets_compare_and_hash_equal_whatever_the_order() -> None:
    first = Lockset.of("file:a:S", "browser_tab:X")
    second = Lockset([LockRequest("browser_tab", "X"), "file:a:S", "file:a:S"])

    assert first == second
    assert hash(first) == hash(second)
    assert first != Lockset.of("file:a:X", "browser_tab:X")
    assert len(first) == 2
    assert first.resources == frozenset({"browser_tab", "file:a"})
    assert repr(first) == "Lockset.of('browser_tab:X', 'file:a:S')"


def test_entries_carry_kind_and_exclusivity_in_canonical_order() -> None:
    lockset = Lockset.of("workspace:X", "file:src/a.py:S", "net:brave:X")

    assert lockset.entries == (
        ("file:src/a.py", False, KIND_FILE, ("file:.", "file:src")),
        ("net:brave", True, KIND_INDEPENDENT, ()),
        ("workspace", True, KIND_WORKSPACE, ()),
    )


@pytest.mark.parametrize(
    ("key", "ancestors"),
    [
        ("file:.", ()),
        ("file:a.py", ("file:.",)),
        ("file:src/pkg/a.py", ("file:.", "file:src", "file:src/pkg")),
        ("workspace", ()),
        ("choirtmp", ()),
    ],
)
def test_file_entries_name_the_directories_above_them(key: str, ancestors: tuple[str]) -> None:
    """The §9.2 hierarchy: a lock on any of these directories covers the key."""
    [entry] = Lockset.of(f"{key}:S").entries
    assert entry[3] == ancestors


def test_empty_lockset_is_allowed_for_lock_free_tools() -> None:
    assert len(Lockset()) == 0


def test_parse_keeps_colons_inside_the_resource() -> None:
    assert LockRequest.parse("file:dir/a:b.txt:X") == LockRequest("file:dir/a:b.txt", "X")


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("workspace", KIND_WORKSPACE),
        ("file:src/auth.go", KIND_FILE),
        ("file:.github/ci.yml", KIND_FILE),
        ("file:.", KIND_FILE),
        ("mem:ws1", KIND_INDEPENDENT),
        ("repo:ws1", KIND_INDEPENDENT),
        ("browser_tab", KIND_INDEPENDENT),
        ("choirtmp", KIND_INDEPENDENT),
        ("net:brave", KIND_INDEPENDENT),
        ("ext:smtp", KIND_INDEPENDENT),
    ],
)
def test_every_namespace_of_section_9_2_is_accepted(key: str, kind: int) -> None:
    assert key_kind(key) == kind


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("files:a.py", "unknown lock resource"),
        ("browser", "unknown lock resource"),
        ("workspace:main", "unknown lock resource"),
        ("file:", "names nothing"),
        ("net:", "names nothing"),
        ("file:/etc/passwd", "not normalized"),
        ("file:src/../x", "not normalized"),
        ("file:./x", "not normalized"),
        ("file:src/.", "not normalized"),
        ("file:src//x", "not normalized"),
        ("file:src/", "not normalized"),
        ("file:.choirtmp/send/a.mp3", "lock choirtmp instead"),
    ],
)
def test_invalid_keys_name_the_problem_and_the_fix(key: str, message: str) -> None:
    with pytest.raises(LockKeyError, match=message) as raised:
        Lockset.of(f"{key}:S")
    assert raised.value.exit_code == ExitCode.USAGE
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("spec", ["workspace", "workspace:R", "file:a.py:x", ""])
def test_a_lock_without_a_mode_is_rejected(spec: str) -> None:
    with pytest.raises(LockKeyError, match="has no mode"):
        LockRequest.parse(spec)


def test_a_request_tuple_with_a_bad_mode_is_rejected() -> None:
    with pytest.raises(LockKeyError, match="is not S or X"):
        Lockset([LockRequest("workspace", "R")])  # type: ignore[arg-type]


@pytest.mark.parametrize("owner", ["edge", "core:refactor-auth", "core:x"])
def test_lanes_are_owners(owner: str) -> None:
    assert check_owner(owner) == owner


@pytest.mark.parametrize("owner", ["", "core:", "core", "Edge", "arbiter", "edge:1"])
def test_anything_else_is_not_an_owner(owner: str) -> None:
    with pytest.raises(LockKeyError, match="'edge' or 'core:<job-name>'"):
        check_owner(owner)
