"""The workspace file tools: read, write and search, every path kept inside the workspace."""
