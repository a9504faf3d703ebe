"""Adapters: one external service or library each, its failures turned into choir errors here.

Each adapter lives in its own module or package and is imported by name
(`choir.adapters.llm.client`), so loading one never pays for another's dependencies.
"""
