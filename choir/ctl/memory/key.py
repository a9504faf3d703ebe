"""Reading an agent's memory key from a file on the operator's machine (choirctl's
`agent start --memory-key-file`, the console's agent start): both check it with the same parser,
so a bad key never leaves the operator's machine."""

from __future__ import annotations

import sys
from pathlib import Path

from choir.core.memory.sealing import parse_key
from choir.errors import UsageError


def read_memory_key(path: Path, what: str) -> bytes:
    """The 32-byte key in `path` (`-`: stdin); `what` names where the path was given."""
    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else path.expanduser().read_bytes()
    except OSError as error:
        raise UsageError(
            f"{what} {path}: cannot read it ({error.strerror}); give the key file's path"
            + (", or - to read the key from stdin" if what.startswith("--") else "")
        ) from None
    return parse_key(raw)
