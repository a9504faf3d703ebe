"""The embedded local model (wordllama, offline) behind the provider interface."""

from __future__ import annotations

import asyncio
import mmap
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from choir.daemon.memory.embedding import local_provider
from choir.daemon.memory.embedding.local_provider import LocalEmbeddings


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


async def test_similar_sentences_are_closer_than_unrelated_ones():
    cat, kitten, tax = await LocalEmbeddings().embed(
        ["the cat sat on the mat", "a kitten rests on a rug", "quarterly tax filing deadline"]
    )
    assert cosine(cat, kitten) > cosine(cat, tax) + 0.2
    assert cat.shape == (256,)
    assert cat.dtype == np.float32


async def test_the_model_is_loaded_once_by_concurrent_first_calls():
    embedder = LocalEmbeddings()
    await asyncio.gather(*(embedder.embed([f"text {n}"]) for n in range(4)))
    model = local_provider._model
    assert model is not None
    await embedder.embed(["again"])
    assert local_provider._model is model


async def test_embedding_runs_off_the_event_loop():
    embedder = LocalEmbeddings()
    await embedder.load()
    texts = [
        f"note {n}: the deploy of service {n % 17} finished with warnings" for n in range(30_000)
    ]
    beats = 0

    async def heartbeat() -> None:
        nonlocal beats
        while True:
            await asyncio.sleep(0.005)
            beats += 1

    ticking = asyncio.create_task(heartbeat())
    vectors = await embedder.embed(texts)  # ~0.2 s of work
    ticking.cancel()
    assert len(vectors) == len(texts)
    assert beats >= 3  # the loop kept turning while the model worked (0 if it ran there)


async def test_no_texts_no_call():
    assert await LocalEmbeddings().embed([]) == []


def test_loading_the_model_leaves_logging_as_it_was():
    """wordllama runs `logging.basicConfig(level=INFO)` when imported; choird's logging must not
    change because the model was loaded."""
    script = (
        "import asyncio, logging\n"
        "from choir.daemon.memory.embedding.local_provider import LocalEmbeddings\n"
        "asyncio.run(LocalEmbeddings().load())\n"
        "root = logging.getLogger()\n"
        "print(len(root.handlers), logging.getLevelName(root.level))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["0", "WARNING"]


def wordllama_model():
    """wordllama's own `WordLlamaInference` of the same files, loaded offline the way its README
    says (its `load` looks for the tokenizer in another folder than the package's own)."""
    import tempfile
    from pathlib import Path

    import wordllama

    package = Path(wordllama.__file__).parent
    with tempfile.TemporaryDirectory(prefix="choir-wordllama-") as folder:
        for part in ("tokenizers", "weights"):
            (Path(folder) / part).symlink_to(package / part, target_is_directory=True)
        return wordllama.WordLlama.load(cache_dir=folder, disable_download=True)


async def test_vectors_equal_wordllamas_own_embedding():
    """The model read from wordllama's files without wordllama, pooled with less padding by
    local_pooling: the vectors of wordllama's own load and embed."""
    texts = [
        "",
        "   ",
        "ok",
        "the cat sat on the mat",
        "Grüße aus Köln — 東京 🚀 naïve café",
        "tool call fs.read path=src/app/config.py returned 412 lines " * 20,
        *(f"chunk {n}: {'word ' * (n % 37)}end" for n in range(300)),
    ]
    ours = np.stack(await LocalEmbeddings().embed(texts))
    with np.errstate(invalid="ignore", divide="ignore"):
        theirs = wordllama_model().embed(texts)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


def test_the_model_loads_without_importing_wordllama():
    """wordllama's import and load would cost choird ~65 MB it keeps (local_provider)."""
    script = (
        "import asyncio, sys\n"
        "from choir.daemon.memory.embedding.local_provider import LocalEmbeddings\n"
        "asyncio.run(LocalEmbeddings().load())\n"
        "print('wordllama' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False"]


def weights_file() -> Path:
    return local_provider._package() / "weights" / local_provider.WEIGHTS_FILE


def is_mapped(array: np.ndarray) -> bool:
    """Whether `array`'s memory is a file mapping (an `mmap` at the end of its bases)."""
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)


def test_the_table_is_written_once_to_the_cache_and_mapped_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The float32 table is memory-mapped from a file in the cache directory: only the rows
    used become resident, instead of 31 MB in choird's memory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    older = tmp_path / "choir" / f"{local_provider.TABLE_PREFIX}0123456789abcdef.npy"
    older.parent.mkdir()
    older.write_bytes(b"an older wordllama's table")
    first = local_provider._table(weights_file())
    (cached,) = (tmp_path / "choir").iterdir()  # the older one removed
    assert is_mapped(first)
    assert not first.flags.writeable
    written = cached.stat().st_mtime_ns
    again = local_provider._table(weights_file())
    assert cached.stat().st_mtime_ns == written  # read, not written again
    np.testing.assert_array_equal(first, again)
    assert first.shape == (32_001, local_provider.DIMENSIONS)
    assert not first[-1].any()  # the padding row


def test_a_damaged_cached_table_is_written_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    good = np.array(local_provider._table(weights_file()))
    (cached,) = (tmp_path / "choir").iterdir()
    cached.write_bytes(cached.read_bytes()[: 1 << 20])  # cut short, as by a full disk
    np.testing.assert_array_equal(local_provider._table(weights_file()), good)
    cached.write_bytes(b"not a table")
    np.testing.assert_array_equal(local_provider._table(weights_file()), good)
    assert [p.name for p in (tmp_path / "choir").iterdir()] == [cached.name]  # no temporaries


def test_an_unwritable_cache_keeps_the_table_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    table = local_provider._table(weights_file())
    assert not is_mapped(table)
    np.testing.assert_array_equal(table, local_provider._table(weights_file()))
