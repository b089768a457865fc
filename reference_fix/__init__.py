"""The reference fix for the parked-inbox bug (agentscope 2.0.7 and 2.0.8).

The one place in this project that patches agentscope, and only when asked
(``pytest --reference-fix``, ``hitl-harness ... --with-fix``). See
:mod:`reference_fix.parked_continuation`.
"""
from .parked_continuation import (
    COVERS,
    FixRefused,
    apply,
    check_target,
    is_applied,
    refusal,
    remove,
    unified_diff,
    TARGET_RELEASES,
)

__all__ = [
    "COVERS",
    "FixRefused",
    "TARGET_RELEASES",
    "apply",
    "check_target",
    "is_applied",
    "refusal",
    "remove",
    "unified_diff",
]
