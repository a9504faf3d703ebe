"""wordllama's embedding — the mean of a text's token vectors — computed with less padding.

wordllama's own `embed` pads every batch of 64 texts to its longest text and multiplies the
padding by a zero mask: on memory chunks (6-40 words) over half the work was padding, and the
local model made 11-16k texts per CPU-second here, under the 20k goal (bench.memory). Same
tokenizer, same weights, same mean: texts are sorted by token count so a batch pads little, and
the padding points at an all-zero row, so a plain sum needs no mask (~29k texts/s; the vectors
equal wordllama's, tests/memory/test_local_provider.py).
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

GROUP = 256
"""Texts summed in one numpy call (similar lengths after sorting); 64 measured slower."""


def padded(table: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
    """wordllama's weight table (float16 as stored) as `MeanPooler` uses it: float32, with an
    all-zero row appended for padding to point at. float16 gathered and summed in float32 gives
    the same vectors but a third fewer texts per CPU-second (bench.memory)."""
    rows, dimensions = table.shape
    out = np.zeros((rows + 1, dimensions), np.float32)
    out[:rows] = table
    return out


class MeanPooler:
    """Embeds texts with wordllama's tokenizer and weight table (one row per token id, as
    `padded` makes it: float32, its last row zeros). The table may be a read-only memory map:
    only the rows of the tokens seen are then read into memory."""

    def __init__(self, tokenizer: Tokenizer, table: npt.NDArray[np.float32]) -> None:
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        rows, self.dimensions = table.shape
        if table.dtype != np.float32 or table[-1].any():
            raise ValueError("the weight table is not float32 with a last row of zeros")
        if tokenizer.get_vocab_size() >= rows:  # wordllama clips ids; none to clip here
            raise ValueError("the tokenizer has more tokens than the weight table has rows")
        self._pad = rows - 1
        """The id of the zero row padding points at, one past the vocabulary."""
        self._table = table

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One row per text: the mean of its token vectors (zeros for a text with no token)."""
        encodings = self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        ids = [e.ids for e in encodings]
        out = np.empty((len(texts), self.dimensions), np.float32)
        order = sorted(range(len(ids)), key=lambda k: len(ids[k]))
        for start in range(0, len(order), GROUP):
            group = order[start : start + GROUP]
            out[group] = self._mean(ids, group)
        return out

    def _mean(self, ids: list[list[int]], group: list[int]) -> npt.NDArray[np.float32]:
        rows = [ids[k] for k in group]
        lengths = np.fromiter(map(len, rows), np.int64, len(rows))
        longest = max(1, int(lengths[-1]))  # sorted: the last is the longest
        padded = np.full((len(rows), longest), self._pad, np.int64)
        padded[np.arange(longest) < lengths[:, None]] = np.fromiter(
            chain.from_iterable(rows), np.int64, int(lengths.sum())
        )  # a boolean mask fills row by row: each text's ids, then its padding
        sums: npt.NDArray[np.float32] = self._table[padded].sum(axis=1)
        counts = np.maximum(lengths, 1).astype(np.float32)
        means: npt.NDArray[np.float32] = sums / counts[:, None]
        return means
