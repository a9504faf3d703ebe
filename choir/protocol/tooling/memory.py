"""Working-memory documents (§11.3): the per-lane reference summary and the deltas that edit it.

The model never rewrites a summary wholesale; it emits a structured `MemoryDelta`, and
`ReferenceSummary.apply` folds it in. A bad delta can only touch what it names.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from choir.protocol.base import WireModel


class Fact(WireModel):
    """A keyed fact kept in the summary, traceable to the event it came from."""

    key: str = Field(min_length=1)
    """Stable key, e.g. `user.preference.theme`; a new fact with the same key replaces it."""
    value: str
    """The fact itself."""
    source_event: str
    """Hash of the event the fact was taken from."""


class FactKey(WireModel):
    """Names a fact to remove."""

    key: str = Field(min_length=1)
    """Key of the fact to remove."""


class ReferenceSummary(WireModel):
    """Everything that has rolled off a lane's event window, as one structured document."""

    summary: str = ""
    """Prose summary of what rolled off the window."""
    facts: list[Fact] = Field(default_factory=list)
    """Keyed facts; at most one per key."""
    referenced_sessions: list[str] = Field(default_factory=list)
    """Session ids the summary draws on (e.g. from memory queries)."""
    referenced_events: list[str] = Field(default_factory=list)
    """Hashes of events the summary cites."""

    def apply(self, delta: MemoryDelta) -> ReferenceSummary:
        """The summary after `delta`: text appended or replaced, references and facts edited."""
        if delta.mode == "overwrite":
            text = delta.summary_update
        else:
            text = "\n".join(part for part in (self.summary, delta.summary_update) if part)
        dropped = set(delta.remove_references)
        references = [ref for ref in self.referenced_events if ref not in dropped]
        references += [ref for ref in dict.fromkeys(delta.add_references) if ref not in references]
        gone = {fact.key for fact in (delta.remove_fact, delta.add_fact) if fact is not None}
        facts = [fact for fact in self.facts if fact.key not in gone]
        if delta.add_fact is not None:
            facts.append(delta.add_fact)
        return self.model_copy(
            update={"summary": text, "facts": facts, "referenced_events": references}
        )


class MemoryDelta(WireModel):
    """One structured edit of a reference summary, produced by a compaction LLM call."""

    mode: Literal["append", "overwrite"]
    """`append` adds `summary_update` to the summary text; `overwrite` replaces the text.
    Facts and references are edited by their own fields in either mode."""
    summary_update: str = ""
    """Text appended to, or replacing, the summary."""
    add_references: list[str] = Field(default_factory=list)
    """Event hashes to cite."""
    remove_references: list[str] = Field(default_factory=list)
    """Event hashes to stop citing."""
    add_fact: Fact | None = None
    """Added, or replacing the fact with the same key."""
    remove_fact: FactKey | None = None
    """Key of a fact to drop."""


class MemoryDeltaDocument(WireModel):
    """The exact document a compaction call must return: `{"memory_delta": {...}}`."""

    memory_delta: MemoryDelta
    """The delta."""
