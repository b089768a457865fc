"""A story step in words: each rule's own sentence (declared beside the
rule, see :mod:`properties.rules.story_rule`), filled with the step's
arguments, so a shrunk program reads as the story that broke agentscope."""
from __future__ import annotations

from .. import rules  # noqa: F401  (every rule registers its sentence)
from ..rules.story_rule import sentence
from ..rules.vocabulary import MID_ANSWER


def narrate(rule: str, arguments: dict, streaming: bool = False) -> str:
    """One sentence for one step (the call itself for an unknown rule);
    ``streaming``: the story's machine stops new runs mid-answer."""
    text = sentence(rule, arguments)
    if text is None:
        rendered = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        return f"{rule}({rendered})"
    for plain, mid_answer in MID_ANSWER.items() if streaming else ():
        text = text.replace(plain, mid_answer)
    return text
