"""Whether a folder the harness will write into can be written, found out
before any work by trying it: a permission check alone says yes to root on
a read-only or virtual file system (``/proc``). The probe leaves nothing
behind: the folders it made and its file are removed again."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def folder_problem(path: Path) -> str | None:
    """Why ``path`` is not, and cannot be made, a folder to write in (one
    line), or ``None`` when it can."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        return "is a file, not a folder"
    made = []
    folder = path.absolute()
    try:
        for parent in [*reversed(folder.parents), folder]:
            if not parent.exists():
                parent.mkdir()
                made.append(parent)
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".hitl-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        return f"cannot write there ({error.strerror or type(error).__name__})"
    finally:
        for parent in reversed(made):
            try:
                parent.rmdir()
            except OSError:
                pass
    return None
