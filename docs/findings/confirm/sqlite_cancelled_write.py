"""Can a cancel that lands inside a storage write leave sqlite locked?

agentscope's app keeps its records in ``AsyncSQLAlchemyStorage`` on a
sqlite file through aiosqlite (``sqlite+aiosqlite:///<file>``). A stop
cancels the chat run's task; ``ChatService``'s ``_persist`` writes the
reply with ``upsert_message`` and the agent state with
``update_session_state``. This script asks whether such a cancel can leave
the file locked, so that the next write fails with ``sqlite3.OperationalError:
database is locked`` (or waits on the lock).

Standalone: agentscope and the standard library only.

Scenarios (each on a fresh sqlite file, the app's storage built as the app
builds it):

1. one process: a ``_persist``-shaped write (``upsert_message`` then
   ``update_session_state``) is started, and cancelled after n passes of
   the loop (``asyncio.sleep(0)``), n = 0, 1, 2, ... past the write's end;
   then once more with a second cancel g passes after the first (a
   double stop). Right after the cancel a fresh write of the same session
   starts, in a task of its own, with a timeout. When both have ended, a
   plain sqlite3 connection asks for the write lock (``BEGIN IMMEDIATE``,
   1 s busy timeout): a lock still held then is a lock left behind.
2. two processes: the same, while a second process (this script with
   ``--peer``) has its own storage on the same file and writes (and
   cancels some of its own writes) the whole time.
3. (information, not a deployment) a write abandoned mid-transaction on an
   event loop that is thrown away, as a script's teardown or a second
   event loop could do: the write lock stays with that loop's connection.

Exit codes: 1 if in scenario 1 or 2 a write failed with "database is
locked", hung, or a lock was left behind; 0 if never; 3 on an error of the
script's own (its cause is printed), a write that failed otherwise than on a
lock included.

Run (from the repository root, with the python of the release to test):

    python docs/findings/confirm/sqlite_cancelled_write.py [--points 40]
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata as md
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

from agentscope.agent import ContextConfig, ReActConfig
from agentscope.app.storage import (
    AgentData,
    AgentRecord,
    AsyncSQLAlchemyStorage,
    SessionConfig,
    UserRecord,
)
from agentscope.message import AssistantMsg
from agentscope.state import AgentState

HANG = 12.0  # s; sqlite's busy timeout (pysqlite's default) is 5 s


def versions() -> str:
    return ", ".join(f"{p} {md.version(p)}" for p in ("agentscope", "sqlalchemy", "aiosqlite"))


def url(db: Path) -> str:
    return f"sqlite+aiosqlite:///{db}"


def is_locked(exc: BaseException) -> bool:
    return "database is locked" in str(exc) or "database table is locked" in str(exc)


def probe(db: Path, timeout: float = 1.0) -> bool:
    """True if another connection holds the write lock (it is not free
    within ``timeout``)."""
    con = sqlite3.connect(db, timeout=timeout, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        if is_locked(exc):
            return True
        raise
    finally:
        con.close()


class Writer:
    """One app process's storage, one user, agent and session."""

    def __init__(self, storage: AsyncSQLAlchemyStorage) -> None:
        self.storage = storage
        self.user_id = UserRecord().id
        self.turn = 0

    async def setup(self) -> "Writer":
        data = AgentData.model_validate({
            "name": "solo", "system_prompt": "You are a helpful assistant.",
            "context_config": ContextConfig(), "react_config": ReActConfig(),
        })
        self.agent_id = await self.storage.upsert_agent(
            self.user_id, AgentRecord(user_id=self.user_id, data=data))
        record = await self.storage.upsert_session(
            user_id=self.user_id, agent_id=self.agent_id,
            config=SessionConfig(workspace_id="ws"), state=AgentState())
        self.session_id = record.id
        return self

    async def persist(self) -> str:
        """What ``ChatService``'s ``_persist`` writes: the reply, then the
        agent state. Returns the reply's id."""
        self.turn += 1
        msg = AssistantMsg(name="solo", content=f"reply {self.turn}")
        await self.storage.upsert_message(self.user_id, self.session_id, msg)
        await self.storage.update_session_state(
            user_id=self.user_id, agent_id=self.agent_id,
            session_id=self.session_id, state=AgentState())
        return msg.id


async def passes(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def one_try(w: Writer, db: Path, first: int, gap: int | None, tally: Counter,
                  notes: list[str]) -> None:
    """Cancel a write after ``first`` passes (and again ``gap`` passes
    later), start a fresh write at once, then look for a lock left."""
    cancelled = asyncio.create_task(w.persist())
    await passes(first)
    cancelled.cancel()
    if gap is not None:
        await passes(gap)
        cancelled.cancel()
    fresh = asyncio.create_task(w.persist())
    try:
        await asyncio.wait_for(asyncio.shield(fresh), HANG)
        tally["fresh write ok"] += 1
    except asyncio.TimeoutError:
        tally["fresh write HUNG"] += 1
        notes.append(f"cancel at {first}/{gap}: fresh write still waiting after {HANG} s")
        await asyncio.gather(fresh, return_exceptions=True)
    except Exception as exc:  # noqa: BLE001 - what failed is the finding
        key = "fresh write LOCKED" if is_locked(exc) else f"fresh write failed: {type(exc).__name__}"
        tally[key] += 1
        notes.append(f"cancel at {first}/{gap}: {type(exc).__name__}: {str(exc)[:160]}")
    (res,) = await asyncio.gather(cancelled, return_exceptions=True)
    if isinstance(res, asyncio.CancelledError):
        tally["cancel landed inside the write"] += 1
    elif isinstance(res, BaseException):
        tally[f"cancelled write raised {type(res).__name__}"] += 1
        notes.append(f"cancel at {first}/{gap}: cancelled write raised {res!r}"[:200])
    else:
        tally["write had ended before the cancel"] += 1
    if probe(db):
        tally["lock LEFT after both ended"] += 1
        start = time.monotonic()
        while probe(db, timeout=0.2) and time.monotonic() - start < 8:
            await asyncio.sleep(0.1)
        gc.collect()
        held = time.monotonic() - start
        notes.append(f"cancel at {first}/{gap}: lock left, "
                     f"{'cleared' if not probe(db) else 'still held'} after {held:.1f} s")


async def calibrate(w: Writer) -> int:
    """Loop passes an uncancelled write takes."""
    task = asyncio.create_task(w.persist())
    n = 0
    while not task.done():
        await asyncio.sleep(0)
        n += 1
    await task
    return n


async def cancel_sweep(db: Path, points: int, label: str) -> tuple[Counter, list[str]]:
    tally: Counter = Counter()
    notes: list[str] = []
    async with AsyncSQLAlchemyStorage(url(db)) as storage:
        w = await Writer(storage).setup()
        length = max([await calibrate(w) for _ in range(3)])
        top = max(points, length + 5)
        step = max(1, top // points)
        for first in range(0, top, step):
            await one_try(w, db, first, None, tally, notes)
        for first in range(0, top, step * 2):
            for gap in (0, 1, 3):
                await one_try(w, db, first, gap, tally, notes)
    tally["(a write takes, loop passes)"] = length
    report(label, tally, notes)
    return tally, notes


def report(label: str, tally: Counter, notes: list[str]) -> None:
    print(f"{label}:")
    for key, value in sorted(tally.items()):
        print(f"   {key}: {value}")
    for note in notes[:8]:
        print(f"   - {note}")
    if len(notes) > 8:
        print(f"   - ... {len(notes) - 8} more")


def bad(tally: Counter) -> int:
    """Writes that met the finding: sqlite locked, a write waiting on a
    lock, a lock left behind."""
    return sum(v for k, v in tally.items()
               if any(word in k for word in ("LOCKED", "HUNG", "LEFT")))


def odd(tally: Counter) -> list[str]:
    """Writes that failed some other way: the script's own trouble, not the
    finding (exit 3)."""
    return [f"{k}: {v}" for k, v in tally.items() if "failed" in k]


# ── the second process ───────────────────────────────────────────────

async def peer(db: Path, seconds: float) -> None:
    """Another app process on the same file: writes, and cancels every
    third of its own writes after a random number of loop passes."""
    tally: Counter = Counter()
    notes: list[str] = []
    rng = random.Random(7)
    async with AsyncSQLAlchemyStorage(url(db)) as storage:
        w = await Writer(storage).setup()
        print("ready", flush=True)
        end = time.monotonic() + seconds
        k = 0
        while time.monotonic() < end:
            k += 1
            task = asyncio.create_task(w.persist())
            if k % 3 == 0:
                await passes(rng.randrange(0, 40))
                task.cancel()
            try:
                await asyncio.wait_for(asyncio.shield(task), HANG)
                tally["peer write ok"] += 1
            except asyncio.CancelledError:
                tally["peer write cancelled"] += 1
            except asyncio.TimeoutError:
                tally["peer write HUNG"] += 1
                await asyncio.gather(task, return_exceptions=True)
            except Exception as exc:  # noqa: BLE001
                tally["peer write LOCKED" if is_locked(exc)
                      else f"peer write failed: {type(exc).__name__}"] += 1
                notes.append(f"{type(exc).__name__}: {str(exc)[:160]}")
            await asyncio.sleep(0.002)
    print(json.dumps({"tally": tally, "notes": notes[:8]}), flush=True)


async def with_peer_counted(db: Path, points: int, seconds: float) -> tuple[Counter, Counter]:
    """The peer runs for ``seconds`` and reports its own counts."""
    async with AsyncSQLAlchemyStorage(url(db)):
        pass
    proc = subprocess.Popen([sys.executable, __file__, "--peer", str(db), str(seconds)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = await asyncio.to_thread(proc.stdout.readline)
    if line.strip() != "ready":
        raise RuntimeError(f"peer did not start: {line!r} {proc.stderr.read()[-2000:]}")
    started = time.monotonic()
    tally, _ = await cancel_sweep(db, points, "2. two processes on one file (this process)")
    out, err = await asyncio.to_thread(proc.communicate, None, seconds + HANG + 30)
    if proc.returncode != 0:
        raise RuntimeError(f"peer exited {proc.returncode}: {err[-2000:]}")
    got = json.loads(out.strip().splitlines()[-1])
    theirs = Counter(got["tally"])
    theirs["(sweep overlapped the peer, s)"] = round(min(time.monotonic() - started, seconds), 1)
    report("   the other process", theirs, got["notes"])
    return tally, theirs


# ── information: a write abandoned on a discarded loop ──────────────

def abandoned_loop(db: Path) -> str:
    """A write's loop stops mid-transaction and is dropped: no task is
    cancelled, no connection closed (a teardown that does not close, or a
    second event loop that is gone)."""
    box: dict = {}

    def run() -> None:
        loop = asyncio.new_event_loop()
        storage = AsyncSQLAlchemyStorage(url(db))
        loop.run_until_complete(storage.__aenter__())
        w = loop.run_until_complete(Writer(storage).setup())
        task = loop.create_task(w.persist())
        for _ in range(2000):
            loop.run_until_complete(asyncio.sleep(0))
            if probe(db, timeout=0):
                break
        box["mid"] = probe(db, timeout=0) and not task.done()
        box["keep"] = (loop, storage, w, task)  # the loop is simply not run again

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if not box.get("mid"):
        return "write ended before its transaction could be caught open (no result)"

    async def next_write() -> str:
        async with AsyncSQLAlchemyStorage(url(db), create_tables=False) as storage:
            try:
                await asyncio.wait_for(Writer(storage).setup(), HANG)
                return "next write ok"
            except Exception as exc:  # noqa: BLE001
                return f"next write: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"

    start = time.monotonic()
    first = asyncio.run(next_write())
    first += f" (after {time.monotonic() - start:.1f} s)"
    still = probe(db)
    box.clear()
    gc.collect()
    time.sleep(0.5)
    return (f"{first}; lock still held: {still}; after dropping the loop and gc: "
            f"{'held' if probe(db) else 'free'}")


# ── main ────────────────────────────────────────────────────────────

async def main(points: int) -> int:
    print(versions())
    base = Path(tempfile.mkdtemp(prefix="sqlite-cancel-"))
    try:
        single, _ = await cancel_sweep(base / "one.db", points, "1. one process")
        mine, theirs = await with_peer_counted(base / "two.db", points, 20.0)
        print("3. (information) a write abandoned mid-transaction on a discarded loop:")
        print("   " + await asyncio.to_thread(abandoned_loop, base / "three.db"))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    problems = bad(single) + bad(mine) + bad(theirs)
    if problems:
        print(f"CONFIRMED: {problems} writes saw sqlite locked (or a lock left) after a cancel")
        return 1
    others = odd(single) + odd(mine) + odd(theirs)
    if others:
        print(f"script error (exit 3): writes failed otherwise than on a lock: {others}")
        return 3
    print("not reproduced: no write failed or waited on a lock, no lock was left behind "
          "(one process, and two processes on one file)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=40)
    parser.add_argument("--peer", nargs=2, metavar=("DB", "SECONDS"))
    args = parser.parse_args()
    try:
        if args.peer:
            asyncio.run(peer(Path(args.peer[0]), float(args.peer[1])))
            sys.exit(0)
        sys.exit(asyncio.run(main(args.points)))
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        print("script error (exit 3): see the traceback above")
        sys.exit(3)
