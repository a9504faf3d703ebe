"""The local embedding model is choird's: it must not enter choir-agent's image."""

from __future__ import annotations

from choir.daemon.images.wheelhouse import _pinned_requirements, agent_requirements


def test_wordllama_and_its_dependencies_stay_out_of_the_agent_image() -> None:
    _pinned_requirements.cache_clear()
    names = {pin.split("==")[0] for pin in agent_requirements()}
    assert not names & {"wordllama", "numpy", "tokenizers", "safetensors", "huggingface-hub"}
