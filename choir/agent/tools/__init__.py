"""The in-container tools (§8.7): the built-ins (`builtin.BUILTIN_TOOLS`) and external tools.

The package imports none of its modules: a tool module importing a sibling does not load them all.
"""
