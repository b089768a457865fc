"""Keep agentscope's own log lines out of property runs.

A failing story makes agentscope log the exception it swallowed (that is the
bug), once per example Hypothesis tries: thousands of tracebacks that bury
the one report that matters. The harness reports what agentscope published
instead. Set ``HITL_AGENTSCOPE_LOGS=1`` to see agentscope's logs again."""
from __future__ import annotations

import logging
import os
import warnings

from .marks import AGENTSCOPE_LOGGER


def silence_agentscope() -> None:
    """Raise agentscope's logger threshold unless asked not to."""
    if os.environ.get("HITL_AGENTSCOPE_LOGS"):
        return
    logging.getLogger(AGENTSCOPE_LOGGER).setLevel(logging.CRITICAL + 1)
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="agentscope")
