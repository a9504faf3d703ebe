"""The embedded default embedder: wordllama's `l2_supercat`, 256 dims (§11.9, DESIGN-NOTES).

Its weights and tokenizer ship inside the wordllama wheel, so memory is semantic on a fresh
machine with no key and no network. They are read from the package's files directly (tokenizers
and safetensors, wordllama's own dependencies), without importing wordllama: its `load` keeps the
weights twice (float16 as read, float32 as used) and a padding tokenizer beside the copy
`local_pooling` needs, ~65 MB of choird's resident memory that it kept after the model was built,
and its import runs `logging.basicConfig`. The model is loaded once per process, on first use, in
a worker thread; every embedding also runs in a thread, so the event loop never waits on numpy.
`local_pooling` computes the vectors (wordllama's, tests/memory/test_local_provider.py).

The weight table as used (float32, 31 MB) is written once to the user's cache directory, named
for the digest of the weights it was made from, and memory-mapped from there: only the rows of
the tokens embedded become resident (a few MB for a session's texts, not the whole table in
choird's memory), and the kernel may drop them again under pressure. Where that file cannot be
written, the table is built in memory as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import mmap
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from choir.config.atomic import atomic_write_with
from choir.daemon.heap import trim_heap
from choir.daemon.memory.embedding.errors import EmbeddingError, EmbeddingErrorKind
from choir.daemon.memory.embedding.local_pooling import MeanPooler
from choir.daemon.memory.embedding.provider import Vector

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

DIMENSIONS = 256
"""l2_supercat's size; the pgvector column of agents using the local model is `vector(256)`."""
TOKENIZER_FILE: Final = "l2_supercat_tokenizer_config.json"
WEIGHTS_FILE: Final = f"l2_supercat_{DIMENSIONS}.safetensors"
WEIGHTS_KEY: Final = "embedding.weight"
TABLE_PREFIX: Final = f"l2_supercat_{DIMENSIONS}-f32-"
"""The cached table's name, before the first 16 hex digits of the weights file's SHA-256."""
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
            trim_heap()  # the tokenizer's parse, freed: a few MB choird would keep otherwise
        return _model


def _load() -> MeanPooler:
    """The model from the wordllama package's own files, offline."""
    # choird forks (runtimes, git): tokenizers' thread pool then warns on every fork and may
    # deadlock; one core per embedding is the budget anyway (bench.memory).
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from tokenizers import Tokenizer

        package = _package()
        tokenizer = Tokenizer.from_file(str(package / "tokenizers" / TOKENIZER_FILE))
        return MeanPooler(tokenizer, _table(package / "weights" / WEIGHTS_FILE))
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


def _table(weights: Path) -> npt.NDArray[np.float32]:
    """The padded float32 table (`local_pooling.padded`), memory-mapped from its cached copy,
    which is written first if missing; built in memory when the cache cannot be written."""
    with weights.open("rb") as file:
        digest = hashlib.file_digest(file, "sha256").hexdigest()[:16]
    try:
        cached = cache_dir() / f"{TABLE_PREFIX}{digest}.npy"
    except RuntimeError:  # no home directory to find the cache in
        return _padded(weights)
    with contextlib.suppress(OSError, ValueError):  # missing, or not a table: written anew
        return _mapped(cached)
    table = _padded(weights)
    try:
        _write(cached, table)
    except OSError:  # a read-only or full cache: the table stays in memory
        return table
    for old in cached.parent.glob(f"{TABLE_PREFIX}*.npy"):  # other weights' (an older wordllama)
        if old != cached:
            with contextlib.suppress(OSError):
                old.unlink()
    try:
        return _mapped(cached)
    except (OSError, ValueError):  # a cache on a file system that cannot map it
        return table


def cache_dir() -> Path:
    """choir's folder in the user's cache directory (XDG_CACHE_HOME, else ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "choir"


def _padded(weights: Path) -> npt.NDArray[np.float32]:
    from safetensors import safe_open

    from choir.daemon.memory.embedding.local_pooling import padded

    with safe_open(str(weights), framework="np") as tensors:
        return padded(tensors.get_tensor(WEIGHTS_KEY))


def _mapped(path: Path) -> npt.NDArray[np.float32]:
    """The table in `path`, read-only and mapped, not read; ValueError unless it is a
    float32 table of `DIMENSIONS` columns (a file of another kind, or cut short)."""
    import numpy as np

    with path.open("rb") as file:
        version = np.lib.format.read_magic(file)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(file)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(file)
        if dtype != np.dtype("<f4") or fortran or len(shape) != 2 or shape[1] != DIMENSIONS:
            raise ValueError(f"{path} holds no embedding table")
        offset = file.tell()
        # The rows are read at random, a few at a time. Without this, a fault maps the
        # whole page-cache folio around its row (ext4 caches a written or read-ahead file
        # in folios of up to 2 MB): 27 MB resident for 250 rows here, 1.2 MB with it.
        # Pages another process maps stay cached; the rest are read again, one per fault.
        with contextlib.suppress(OSError):  # advice only: a file system may refuse it
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        mapping = mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ)
    with contextlib.suppress(OSError):
        mapping.madvise(mmap.MADV_RANDOM)  # no read-ahead: a fault reads its one page
    count = shape[0] * shape[1]
    return np.frombuffer(mapping, np.float32, count, offset).reshape(shape)


def _write(path: Path, table: npt.NDArray[np.float32]) -> None:
    """`table` to `path`, whole or not at all: a process that reads it meanwhile, or after a
    crash, finds the complete file or none."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_with(path, lambda file: np.save(file, table, allow_pickle=False), 0o600)
