"""Small readings shared by the checks."""
from __future__ import annotations


def is_error_end(event: dict) -> bool:
    """A ``REPLY_END`` that finished with ERROR."""
    return (
        event.get("type") == "REPLY_END"
        and event.get("finished_reason") == "error"
    )


def markers_in(payloads: list[dict]) -> list[str]:
    """The hint text of each payload (what the harness marked it with)."""
    return [str(p.get("hint")) for p in payloads]


def excerpt(text: str, limit: int = 100) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

