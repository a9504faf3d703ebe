"""Checking Dockerfiles before a build (§17.6 "checks that Dockerfiles parse"), and pinning the
agent image's base.

A small parser of the Dockerfile grammar: parser directives, comments, line continuations and
instructions. It catches what would fail late and far from its cause — an unknown instruction,
an instruction before the first FROM, an agent Dockerfile not built FROM choir-base — so a
build is refused with every problem named before docker runs. The agent's Dockerfile says
`FROM choir-base` (§6.5); the build pins that line to the exact base image it built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

INSTRUCTIONS: Final = frozenset(
    {
        "ADD",
        "ARG",
        "CMD",
        "COPY",
        "ENTRYPOINT",
        "ENV",
        "EXPOSE",
        "FROM",
        "HEALTHCHECK",
        "LABEL",
        "MAINTAINER",
        "ONBUILD",
        "RUN",
        "SHELL",
        "STOPSIGNAL",
        "USER",
        "VOLUME",
        "WORKDIR",
    }
)
BASE_REPOSITORY: Final = "choir-base"
"""The base image every agent image is built FROM (§6.5)."""
_DIRECTIVE: Final = re.compile(r"^#\s*(\w+)\s*=\s*(\S+)\s*$")
_FROM_IMAGE: Final = re.compile(r"^(?P<flags>(?:--\S+\s+)*)(?P<image>\S+)(?P<rest>.*)$", re.DOTALL)


@dataclass(frozen=True)
class Instruction:
    line: int
    """1-based line number where the instruction starts."""
    keyword: str
    """Upper-cased."""
    arguments: str


def parse(text: str) -> tuple[list[Instruction], list[str]]:
    """The instructions of a Dockerfile and the problems found reading them."""
    escape = "\\"
    instructions: list[Instruction] = []
    problems: list[str] = []
    pending: list[str] = []
    start = 0
    directives = True
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if directives and (match := _DIRECTIVE.match(stripped)):
            if match.group(1).lower() == "escape":
                escape = match.group(2)
            continue
        directives = False
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # comments inside a continued instruction are dropped
        if not pending:
            start = number
        continued = stripped.endswith(escape)
        pending.append(stripped[: -len(escape)] if continued else stripped)
        if continued:
            continue
        instructions.append(_instruction(start, " ".join(pending), problems))
        pending = []
    if pending:
        problems.append(f"line {start}: the instruction continues past the end of the file")
    return instructions, problems


def problems(text: str, *, agent: bool) -> list[str]:
    """Everything wrong with a Dockerfile; an agent's must build FROM choir-base."""
    instructions, found = parse(text)
    froms = [i for i in instructions if i.keyword == "FROM"]
    if not froms:
        return [*found, "no FROM instruction: start with FROM choir-base" if agent else "no FROM"]
    before = [i for i in instructions[: instructions.index(froms[0])] if i.keyword != "ARG"]
    found += [f"line {i.line}: {i.keyword} before the first FROM" for i in before]
    if agent and _image(froms[-1]).split(":")[0] != BASE_REPOSITORY:
        found.append(
            f"line {froms[-1].line}: the image must be built FROM {BASE_REPOSITORY} "
            f"(found FROM {froms[-1].arguments}); choir bakes its tools and runtime into that base"
        )
    return found


def pin_base(text: str, reference: str) -> str:
    """`text` with its last FROM (the `choir-base` stage) pointing at `reference`."""
    instructions, _ = parse(text)
    last = [i for i in instructions if i.keyword == "FROM"][-1]
    lines = text.splitlines()
    end = last.line  # a FROM continued over several lines is rewritten on its first one
    while end < len(lines) and lines[end - 1].rstrip().endswith(("\\", "`")):
        lines[end] = ""
        end += 1
    match = _FROM_IMAGE.match(last.arguments)
    flags, rest = (match.group("flags"), match.group("rest")) if match else ("", "")
    lines[last.line - 1] = f"FROM {flags}{reference}{rest}"
    return "\n".join(lines) + "\n"


def _instruction(line: int, text: str, problems: list[str]) -> Instruction:
    keyword, _, arguments = text.partition(" ")
    upper = keyword.upper()
    if upper not in INSTRUCTIONS:
        problems.append(f"line {line}: unknown instruction {keyword!r}")
    elif not arguments.strip():
        problems.append(f"line {line}: {upper} needs arguments")
    return Instruction(line, upper, arguments.strip())


def _image(instruction: Instruction) -> str:
    match = _FROM_IMAGE.match(instruction.arguments)
    return match.group("image") if match else ""
