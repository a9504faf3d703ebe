"""`choirctl knowledge show` of a compaction archive says how to read the messages it
summarizes (a leaf of the summary tree expanded to its source events); other items do not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from choir.ctl.memory.knowledge import fields
from choir.protocol.operator.answers import KnowledgeView

GOLDEN = Path(__file__).parents[1] / "protocol" / "golden" / "v1" / "operator.json"


def view(**changes: Any) -> KnowledgeView:
    shown = json.loads(GOLDEN.read_text())["knowledge.show"]["answers"][0]
    return KnowledgeView.model_validate(shown | changes)


def test_an_archive_names_the_command_that_reads_its_source_messages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = {"session_id": "s-00aa11bb22cc33dd", "lane": "edge", "from_rev": 3, "upto_rev": 9}
    fields(view(name="archive/00aa11bb22cc33dd/9", metadata={"compaction_archive": source}))
    out = capsys.readouterr().out
    assert "sources   choirctl session messages s-00aa11bb22cc33dd --offset 2 --limit 7" in out


def test_another_item_has_no_sources_line(capsys: pytest.CaptureFixture[str]) -> None:
    fields(view())
    assert "sources" not in capsys.readouterr().out
