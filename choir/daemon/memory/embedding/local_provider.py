"""The embedded default embedder: wordllama's `l2_supercat`, 256 dims (§11.9, DESIGN-NOTES).

Its weights and tokenizer ship inside the wordllama wheel, so memory is semantic on a fresh
machine with no key and no network. They are read from the package's files directly (tokenizers
and safetensors, wordllama's own dependencies), without importing wordllama: its `load` keeps the
weights twice (float16 as read, float32 as used) and a padding tokenizer beside the copy
`local_pooling` needs, ~65 MB of choird's resident memory that it kept after the model was built,
and its import runs `logging.basicConfig`. The model is loaded once per process, on first use, in
a worker thread; every embedding also runs in a thread, so the event loop never waits on numpy.
`local_pooling` computes the vectors (wordllama's, tests/memory/test_local_provider.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from choir.daemon.memory.embedding.errors import EmbeddingError, EmbeddingErrorKind
from choir.daemon.memory.embedding.local_pooling import MeanPooler
from choir.daemon.memory.embedding.provider import Vector

DIMENSIONS = 256
"""l2_supercat's size; the pgvector column of agents using the local model is `vector(256)`."""
TOKENIZER_FILE: Final = "l2_supercat_tokenizer_config.json"
WEIGHTS_FILE: Final = f"l2_supercat_{DIMENSIONS}.safetensors"
WEIGHTS_KEY: Final = "embedding.weight"
_load_lock = threading.Lock()
_model: MeanPooler | None = None
"""The process's one model, once loaded (~0.2 s; ~55 MB with numpy and tokenizers)."""


class LocalEmbeddings:
    """An `EmbeddingProvider` computing vectors in-process with wordllama."""

    name = "local"
    dimensions = DIMENSIONS

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One 256-dim vector per text, computed in a worker thread."""
        if not texts:
            return []
        return await asyncio.to_thread(_embed, list(texts))

    async def load(self) -> None:
        """Load the model now (off the event loop), e.g. while choird starts, not on first use."""
        await asyncio.to_thread(_loaded_model)


def _embed(texts: list[str]) -> list[Vector]:
    return list(_loaded_model().embed(texts))


def _loaded_model() -> MeanPooler:
    global _model
    with _load_lock:  # two first calls at once load it once
        if _model is None:
            _model = _load()
        return _model


def _load() -> MeanPooler:
    """The model from the wordllama package's own files, offline."""
    # choird forks (runtimes, git): tokenizers' thread pool then warns on every fork and may
    # deadlock; one core per embedding is the budget anyway (bench.memory).
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from safetensors import safe_open
        from tokenizers import Tokenizer

        package = _package()
        tokenizer = Tokenizer.from_file(str(package / "tokenizers" / TOKENIZER_FILE))
        with safe_open(str(package / "weights" / WEIGHTS_FILE), framework="np") as weights:
            table = weights.get_tensor(WEIGHTS_KEY)
        return MeanPooler(tokenizer, table)
    except Exception as exc:  # any failure of a third-party load means the same to the queue
        raise EmbeddingError(
            EmbeddingErrorKind.MODEL_UNAVAILABLE,
            f"the local embedding model (wordllama) could not be loaded ({type(exc).__name__}: "
            f"{exc}); reinstall choir, or configure an embedding endpoint",
        ) from exc


def _package() -> Path:
    """The installed wordllama package's folder, found without importing it."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the wordllama package is not installed")
    return Path(spec.origin).parent
