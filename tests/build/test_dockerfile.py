"""Dockerfile checks before a build, pinning the agent image's base, and deterministic contexts."""

from __future__ import annotations

import importlib.util
import io
import re
import tarfile
from pathlib import Path

import pytest

from choir.daemon.images import dockerfile
from choir.daemon.images.context import TarContext, digest

SEEDED_BASE = Path(__file__).resolve().parents[2] / "dockerfiles" / "Dockerfile.base"


def test_choirs_own_dockerfiles_pass_the_checks():
    from choir.config.scaffolding.scaffold import DOCKERFILE

    assert dockerfile.problems(SEEDED_BASE.read_text(), agent=False) == []
    assert dockerfile.problems(DOCKERFILE.format(agent_id="a1"), agent=True) == []


def test_the_base_images_import_check_names_modules_that_exist():
    """The build's last step imports choir-agent's runtime: a module renamed under it would fail
    every image build on every host (it named `choir.agent.runtime` after the restructure)."""
    checked = re.findall(r'python -c "import ([\w.]+)', SEEDED_BASE.read_text())

    assert checked
    assert [name for name in checked if importlib.util.find_spec(name) is None] == []


def test_continuations_comments_and_the_escape_directive_are_understood():
    text = (
        "# escape=`\n"
        "# a comment\n"
        "ARG X=1\n"
        "FROM choir-base\n"
        "RUN apt-get update && `\n"
        "    # dropped inside the instruction\n"
        "    apt-get install -y jq\n"
        "\n"
        "env A=b\n"
    )

    instructions, problems = dockerfile.parse(text)

    assert problems == []
    assert [(i.line, i.keyword) for i in instructions] == [
        (3, "ARG"),
        (4, "FROM"),
        (5, "RUN"),
        (9, "ENV"),
    ]
    assert instructions[2].arguments == "apt-get update &&  apt-get install -y jq"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ["no FROM instruction: start with FROM choir-base"]),
        ("RUN true\nFROM choir-base\n", ["line 1: RUN before the first FROM"]),
        ("FROM choir-base\nRUNN true\n", ["line 2: unknown instruction 'RUNN'"]),
        ("FROM choir-base\nCOPY\n", ["line 2: COPY needs arguments"]),
        (
            "FROM choir-base\nRUN a \\\n",
            ["line 2: the instruction continues past the end of the file"],
        ),
        (
            "FROM debian:bookworm-slim\n",
            [
                "line 1: the image must be built FROM choir-base (found FROM "
                "debian:bookworm-slim); choir bakes its tools and runtime into that base"
            ],
        ),
    ],
)
def test_agent_dockerfile_problems_name_the_line_and_the_fix(text, expected):
    assert dockerfile.problems(text, agent=True) == expected


def test_a_multi_stage_build_must_end_on_choir_base():
    text = "FROM debian AS tools\nRUN make\nFROM choir-base:any AS final\nCOPY --from=tools /a /b\n"

    assert dockerfile.problems(text, agent=True) == []
    assert dockerfile.problems("FROM choir-base\nFROM debian\n", agent=True) != []


def test_pin_base_rewrites_only_the_last_from_keeping_flags_and_stage_name():
    text = (
        "FROM debian AS tools\nRUN make\n"
        "FROM --platform=linux/amd64 \\\n  choir-base AS final\nRUN x\n"
    )

    pinned = dockerfile.pin_base(text, "choir-base:0123abcd")

    assert pinned.splitlines() == [
        "FROM debian AS tools",
        "RUN make",
        "FROM --platform=linux/amd64  choir-base:0123abcd AS final",
        "",
        "RUN x",
    ]
    assert dockerfile.problems(pinned, agent=True) == []


def test_a_context_has_the_same_bytes_for_the_same_inputs(tmp_path):
    source = tmp_path / "src"
    (source / "bin").mkdir(parents=True)
    (source / "bin" / "tool").write_text("#!/bin/sh\n")
    (source / "bin" / "tool").chmod(0o755)
    (source / "notes.txt").write_text("hello\n")
    (source / ".git").mkdir()
    (source / ".git" / "HEAD").write_text("ref\n")

    def build() -> bytes:
        context = TarContext()
        context.add_tree("repo", source)
        context.add_bytes("Dockerfile", b"FROM choir-base\n")
        return context.data()

    first = build()
    (source / "notes.txt").touch()  # a new mtime changes nothing
    assert build() == first
    with tarfile.open(fileobj=io.BytesIO(first)) as archive:
        members = {m.name: m for m in archive.getmembers()}
    assert sorted(members) == ["Dockerfile", "repo", "repo/bin", "repo/bin/tool", "repo/notes.txt"]
    assert members["repo/bin/tool"].mode == 0o755
    assert members["repo/notes.txt"].mode == 0o644
    assert {m.mtime for m in members.values()} == {0}
    (source / "notes.txt").write_text("changed\n")
    assert build() != first


def test_digest_parts_cannot_be_shifted_into_each_other():
    assert digest("ab", "c") != digest("a", "bc")
    assert digest(b"x") == digest("x")
