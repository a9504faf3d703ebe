"""The embedded default embedder: wordllama's `l2_supercat`, 256 dims (§11.9, DESIGN-NOTES).

Its weights and tokenizer ship inside the wheel, so memory is semantic on a fresh machine with no
key and no network. `WordLlama.load()` looks for the tokenizer in the wrong folder and then tries
to download it, so it is pointed at a folder holding two links to the package's own `tokenizers`
and `weights` (../shared/ENVIRONMENT.md). The model is loaded once per process, on first use, in
a worker thread; every embedding also runs in a thread, so the event loop never waits on numpy.
wordllama loads the model; `local_pooling` computes its vectors (the same ones, faster).
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from choir.daemon.memory.errors import EmbeddingError, EmbeddingErrorKind
from choir.daemon.memory.local_pooling import MeanPooler
from choir.daemon.memory.provider import Vector

DIMENSIONS = 256
"""l2_supercat's size; the pgvector column of agents using the local model is `vector(256)`."""
_load_lock = threading.Lock()
_model: MeanPooler | None = None
"""The process's one model, once loaded (~0.4 s, ~35 MB)."""


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
            _model = MeanPooler(_wordllama())
        return _model


def _wordllama() -> Any:
    """A fresh `WordLlamaInference`, loaded offline from the wheel's own files."""
    # choird forks (runtimes, git): tokenizers' thread pool then warns on every fork and may
    # deadlock; one core per embedding is the budget anyway (bench.memory).
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        wordllama = _import_quietly()
        package = Path(wordllama.__file__).parent
        with tempfile.TemporaryDirectory(prefix="choir-wordllama-") as folder:
            for part in ("tokenizers", "weights"):
                (Path(folder) / part).symlink_to(package / part, target_is_directory=True)
            return wordllama.WordLlama.load(cache_dir=folder, disable_download=True)
    except Exception as exc:  # any failure of a third-party load means the same to the queue
        raise EmbeddingError(
            EmbeddingErrorKind.MODEL_UNAVAILABLE,
            f"the local embedding model (wordllama) could not be loaded ({type(exc).__name__}: "
            f"{exc}); reinstall choir, or configure an embedding endpoint",
        ) from exc


def _import_quietly() -> Any:
    """`import wordllama`, undoing the `logging.basicConfig(level=INFO)` its inference module
    runs at import: before choird's logging is set up, that would print every log line to
    stderr."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    import wordllama

    root.handlers[:] = handlers
    root.setLevel(level)
    return wordllama
