"""``python -m harness``: the same as the ``hitl-harness`` command."""
import sys

from .tools.cli import main

sys.exit(main())
