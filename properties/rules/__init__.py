"""The rules, one module per party; the machine composes them.

- :mod:`.users`: the user's messages, answers and stop button, and external
  results;
- :mod:`.producers`: payloads delivered to an inbox;
- :mod:`.agentscope_parties`: runs, the wake-up dispatcher, the
  interleaving choice, time;
- :mod:`.faults`: crashes and failing bus operations;
- :mod:`.teams`: leaders inviting members;
- :mod:`.background`: background jobs finishing;
- :mod:`.operators`: a node's graceful shutdown and restart.

:mod:`.story_rule` declares a rule with its sentence; :mod:`.questions`
holds what preconditions ask; :mod:`.vocabulary` the words stories use.
Importing this package registers every rule (and its sentence).
"""
from . import agentscope_parties, background, faults, operators, producers, teams, users  # noqa: F401
