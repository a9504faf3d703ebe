"""The catalogue of in-container built-in tools (§8.7): file read, write and search, and the shell.

`BUILTIN_TOOLS` maps each canonical tool name to its `BuiltinTool` (input model, lock keys, run),
as the kernel's registry takes them. Host tools and meta-tools live elsewhere.
"""

from __future__ import annotations

from typing import Any

from choir.agent.kernel.tool_contract import BuiltinTool
from choir.agent.tools import shell
from choir.agent.tools.fs import read as fs_read
from choir.agent.tools.fs import search as fs_search
from choir.agent.tools.fs import write as fs_write

BUILTIN_TOOLS: dict[str, BuiltinTool[Any]] = {
    tool.name: tool for tool in (fs_read.TOOL, fs_write.TOOL, fs_search.TOOL, shell.TOOL)
}

__all__ = ["BUILTIN_TOOLS"]
