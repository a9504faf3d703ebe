"""Adapters: one external service or library each, its failures turned into choir errors here.

Each adapter lives in its own module and is imported by name (`choir.adapters.llm`), so loading one
never pays for another's dependencies.
"""
