"""The operator API's contract: choirctl, the TUI and the gateway -> choird (§17.1, §19.3).

`verbs` names every verb (`OperatorVerb`) and its models; `requests` holds the payloads.
Import the submodule you need: choirctl loads them only once it has connected.
"""
