"""The rules `embedded_root` starts a root choird's Postgres by (the start itself is exercised
by every test using the session's server, and by tests/security/test_home_permissions.py)."""

from __future__ import annotations

import os
from pathlib import Path

from choir.store.postgres.embedded_root import SOCKET_PATH_MAX, RootServer, closed_parent, ns_data
from tests.harness.homes import short_root


def test_a_closed_parent_is_found_for_another_user() -> None:
    with short_root("er-") as root:  # directly under /tmp: every parent is traversable
        root.chmod(0o755)
        outer = root / "home"
        inner = outer / "choir" / "pgdata"
        inner.mkdir(parents=True)
        outer.chmod(0o700)
        stranger = os.getuid() + 4242

        assert closed_parent(inner, stranger, stranger) == outer
        outer.chmod(0o711)  # traverse-only is enough
        assert closed_parent(inner, stranger, stranger) is None
        assert closed_parent(inner, os.getuid(), os.getgid()) is None


def test_the_namespace_path_keeps_the_data_directory_s_own_path() -> None:
    assert ns_data(Path("/srv/ops/.choir.d/pgdata")) == Path(
        "/run/choir-pg/data/srv/ops/.choir.d/pgdata"
    )


def test_a_data_directory_too_deep_for_a_socket_gets_a_socket_directory_of_its_own() -> None:
    short = RootServer(Path("/srv/h/pgdata"), Path("/opt/pginstall"))
    deep = RootServer(Path("/srv/" + "d" * (SOCKET_PATH_MAX - 20) + "/pgdata"), short.install)

    assert short.socket_dir() == short.datadir
    assert deep.socket_dir().parent == Path("/run/choir-pg-sock")
    assert deep.host_socket_dir(str(ns_data(deep.datadir))) == deep.datadir
