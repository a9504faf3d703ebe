"""The embedded local model (wordllama, offline) behind the provider interface."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np

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
