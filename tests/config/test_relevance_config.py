"""config.json `relevance`: the weights of knowledge relevance search, checked on load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from choir.config import init_home, load_home
from choir.core.memory.knowledge.relevance import RelevanceWeights
from choir.errors import ConfigError
from choir.home import ChoirHome


def _home_with(tmp_path: Path, relevance: object) -> ChoirHome:
    home = ChoirHome(tmp_path / "home")
    init_home(home)
    config = json.loads(home.config_file.read_text())
    config["relevance"] = relevance
    home.config_file.write_text(json.dumps(config))
    return home


def test_weights_come_from_config(tmp_path: Path) -> None:
    home = _home_with(tmp_path, {"bm25": 0.5, "temporal": 0})
    weights = load_home(home).config.relevance.weights()
    assert weights == RelevanceWeights(bm25=0.5, semantic=0.3, temporal=0.0, importance=0.1)


@pytest.mark.parametrize(
    ("relevance", "problem"),
    [
        ({"bm25": 2}, "relevance.bm25: Input should be less than or equal to 1"),
        ({"recency": 0.2}, "relevance.recency: unknown key"),
        (
            {"bm25": 0, "semantic": 0, "temporal": 0, "importance": 0},
            "relevance: Value error, relevance weights are all 0: give at least one of bm25, "
            "semantic, temporal, importance a weight above 0",
        ),
    ],
)
def test_bad_weights_are_refused(tmp_path: Path, relevance: object, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_home(_home_with(tmp_path, relevance))
    assert caught.value.problems == [problem]
