"""The operator API's contract: one enum of verbs, one table of their models, one route each."""

from __future__ import annotations

import inspect

import pytest
from pydantic import ValidationError

from choir.daemon.operator.api import VERBS
from choir.protocol.operator.contract import OPERATOR_MODELS
from choir.protocol.operator.requests import AgentStart, SessionEvents
from choir.protocol.operator.verbs import OperatorVerb


def test_every_verb_has_models_and_a_route_and_nothing_else_does():
    assert set(OPERATOR_MODELS) == set(OperatorVerb)
    assert set(VERBS) == set(OperatorVerb)


@pytest.mark.parametrize("verb", sorted(OperatorVerb))
def test_every_route_names_a_verb_function_that_exists(verb: OperatorVerb):
    """Routes name their functions as strings (imported at a verb's first call): a typo would
    otherwise surface only when an operator first ran the verb."""
    run = VERBS[verb].run
    assert inspect.iscoroutinefunction(run) or inspect.isasyncgenfunction(run)
    assert next(iter(inspect.signature(run).parameters)) == "ctx"


def test_a_verb_is_its_wire_string():
    assert OperatorVerb("agent.start") is OperatorVerb.AGENT_START
    assert OperatorVerb.SESSION_EVENTS == "session.events"
    assert "session.events" in VERBS


def test_request_models_refuse_unknown_fields_and_keep_their_defaults():
    with pytest.raises(ValidationError, match="agent_idd"):
        AgentStart.model_validate({"agent_id": "a", "agent_idd": "b"})
    assert SessionEvents(session_id="s").model_dump(mode="json") == {
        "session_id": "s",
        "from_rev": None,
        "limit": 100,
        "follow": False,
    }
