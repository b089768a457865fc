"""``hitl-harness gate``: the property suite across agentscope releases.

Each SPEC (:mod:`.specs`) gets its own cached environment
(:mod:`.environments`); a probe checks the harness can drive that
agentscope, then the property suite runs in it (:mod:`.runner`). The
verdicts become a table, JSON and JUnit XML (:mod:`.reports`), and one exit
code (:mod:`.outcomes`).
"""
from .gate import gate
from .outcomes import Exit

__all__ = ["Exit", "gate"]
