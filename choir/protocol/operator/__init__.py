"""The operator API's contract: choirctl, the TUI and the gateway -> choird (§17.1, §19.3).

`verbs` names every verb (`OperatorVerb`, free of pydantic); `contract` maps each to its models:
`requests` (payloads), `answers`, `items` (what streams send, unions tagged by `kind`) and the
`views` they share. Import the submodule you need: choirctl loads the answers only once it runs a
command that talks to choird.
"""
