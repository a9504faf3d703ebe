"""Which workspace paths are refused, as a table over a made-up host (pure)."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from choir.config.validation.workspace_paths import (
    ROOTS,
    TREES,
    Protected,
    refusal,
    workspace_problems,
)

P = PurePosixPath
HOST = Protected(
    trees=frozenset(map(P, TREES)),
    roots=frozenset(map(P, ROOTS)),
    homes=frozenset({P("/home/ada"), P("/home/bob"), P("/root")}),
    choir_home=P("/home/ada/.choir.d"),
    docker_dir=P("/srv/docker"),
)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/", "shared by everything below it"),
        ("/etc", "is a system directory"),
        ("/etc/ssh", "is inside /etc"),
        ("/usr/local/bin", "is inside /usr"),
        ("/var/run", "is a system directory"),
        ("/var", "shared by everything below it"),
        ("/var/lib/docker/volumes/x", "is inside /var/lib/docker"),
        ("/tmp", "shared by everything below it"),
        ("/home", "shared by everything below it"),
        ("/home/bob", "is a home directory"),
        ("/home/bob/.ssh", "is .ssh in a home directory"),
        ("/home/ada", "contains $CHOIR_HOME"),
        ("/home/ada/.choir.d", "contains $CHOIR_HOME"),
        ("/home/ada/.choir.d/socks", "is inside $CHOIR_HOME"),
        ("/home/ada/.choir.d/workspaces", "is inside $CHOIR_HOME"),
        ("/srv/docker", "exposes the Docker socket's directory"),
        ("/srv/docker/x", "exposes the Docker socket's directory"),
        ("/srv", "shared by everything below it"),
    ],
)
def test_refused(path: str, why: str) -> None:
    refused = refusal(P(path), HOST)
    assert refused is not None
    assert why in refused


@pytest.mark.parametrize(
    "path",
    [
        "/home/ada/.choir.d/workspaces/default",
        "/home/ada/.choir.d/workspaces/default/deeper",
        "/home/ada/projects/site",
        "/tmp/scratch",
        "/var/lib/choir-ws",
        "/srv/agents/ws",
        "/opt/work",
    ],
)
def test_allowed(path: str) -> None:
    assert refusal(P(path), HOST) is None


def test_a_link_is_named_with_what_it_points_at() -> None:
    problems = workspace_problems({"w": ("/tmp/innocent", P("/etc"))}, HOST)
    assert problems == [
        "workspaces.w.path: /tmp/innocent (a link to /etc) is a system directory; an agent "
        "could write there and workspace reset would empty it: use a directory of its own, "
        "e.g. /home/ada/.choir.d/workspaces/w"
    ]
