"""The race as a picture: a mermaid ``sequenceDiagram`` of a story's trace.

GitHub renders mermaid inside an issue, so a maintainer sees who touched
the bus in which order without reading the whole timeline. One lifeline
per party (the user, each producer, each run, the dispatchers), one arrow
per bus operation that matters to the inbox hand-off (locks, inbox and
trigger queues, the consumer registration, the events that open, park and
end a reply, stops, faults), and the violation marked at the end.
"""
from __future__ import annotations

import re

#: Arrows shown at most; earlier ones are summarised in a note.
MAX_ARROWS = 60

OPS = (
    "acquire_lock", "release_lock", "is_locked", "try_lock", "unlock",
    "queue_push", "queue_drain", "queue_delete",
    "registry_set", "registry_set_if", "registry_get", "registry_del", "registry_pop",
    "registry_exists", "registry_getall", "registry_drop",
    "log_append", "log_read", "log_trim", "publish", "subscribe", "receive",
)
LINE = re.compile(rf"^\s*(\d+)  (.*?) +({'|'.join(OPS)}) +(\S+)(?:  -> (.*))?$")
PARTY = re.compile(r"^» (.+?) (delivers|posts|interrupts|confirms|denies|answers|sends|finishes|invites|messages)\b")
EVENTS = ("REPLY_START", "REPLY_END", "REQUIRE_", "USER_CONFIRM_RESULT", "EXTERNAL_EXECUTION_RESULT", "hint")
WATCHED = ("session:lock", "inbox", "wakeups", "session:interrupt")


def _lifeline(task: str) -> str:
    """The party a trace task belongs to (a user's or producer's several
    actions share one lifeline; each run is its own)."""
    found = PARTY.match(task)
    if found:
        return found.group(1)
    return task.removeprefix("» ")


def _matters(op: str, key: str, detail: str) -> bool:
    if "FAILED" in detail or "CANCELLED" in detail:
        return True
    if op == "log_append":
        return detail.startswith(EVENTS)
    if op == "log_trim":
        return True
    if op in ("subscribe", "log_read"):
        return False
    if op == "publish":
        return "session:interrupt" in key
    return any(part in key for part in WATCHED)


def _text(op: str, key: str, detail: str) -> str:
    key = key.removeprefix("agentscope:")
    if op == "log_append":
        words = f"event {detail}"
    elif op == "log_trim":
        words = "persist (log_trim)"
    else:
        words = f"{op} {key}" + (f" → {detail}" if detail else "")
    words = words.replace("#", " ").replace(";", ",").replace(":", " ")
    return words if len(words) <= 70 else words[:69] + "…"


def sequence_diagram(trace: str, violated: str) -> str:
    """A mermaid block (without fences) for ``trace``, ending in a note
    that says ``violated``."""
    arrows: list[tuple[str, str, bool]] = []
    for line in trace.splitlines():
        found = LINE.match(line)
        if not found:
            continue
        _, task, op, key, detail = found.groups()
        detail = detail or ""
        if task.strip() != "harness" and _matters(op, key, detail):
            arrows.append((_lifeline(task.strip()), _text(op, key, detail), op == "receive"))
    omitted = max(0, len(arrows) - MAX_ARROWS)
    arrows = arrows[omitted:]
    parties: dict[str, str] = {}
    for party, _, _ in arrows:
        parties.setdefault(party, f"P{len(parties) + 1}")
    out = ["sequenceDiagram"]
    out += [f"    participant {pid} as {party.replace(':', ' ')}" for party, pid in parties.items()]
    out.append("    participant BUS as message bus")
    if omitted:
        out.append(f"    Note over BUS: {omitted} earlier operations (see the timeline)")
    for party, text, inbound in arrows:
        pid = parties[party]
        out.append(f"    BUS-->>{pid}: {text}" if inbound else f"    {pid}->>BUS: {text}")
    out.append(f"    Note over BUS: ✗ {violated.replace(';', ',').replace('#', ' ')}")
    return "\n".join(out)
