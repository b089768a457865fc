"""``hitl-harness gate``: the property suite across agentscope releases.

Each SPEC (:mod:`.specs`) gets its own cached environment
(:mod:`.environments`); a probe checks the harness can drive that
agentscope, then the property suite runs in it (:mod:`.runner`). The
verdicts become a table (:mod:`.table`), JSON (:mod:`.reports`) and JUnit
XML (:mod:`.junit`), and one exit code (:mod:`.outcomes`). ``--shard``
splits the releases among CI runners (:mod:`.shards`); ``hitl-harness
merge`` joins their saved verdicts again (:mod:`.merge`).
"""
from .gate import gate
from .outcomes import Exit

__all__ = ["Exit", "gate"]
