"""F18: on Redis, a stop whose cancel lands in an inbox drain loses what it drained.

The harness's story (drain-survives-stops' test): ``solo``'s reply has
ended and a team member's payload, delivered while the run was registered
as the inbox's consumer, waits for the run's turn tail. The user presses
stop; the cancel lands while the turn tail's ``has_pending_inbox_or_release``
waits for its drain (``queue_drain``: one ``EVAL`` that reads and deletes),
or before it has pushed what it drained back. The server applied the
drain; the run's ``finally`` then finds the inbox empty, and the payload is
in neither the stored context nor the inbox.

What the script does, with no hook that changes timing, on
``RedisMessageBus`` against a redis-server of its own: each try a fresh
app; ``solo``'s model answers with text; when the UI sees
``MODEL_CALL_START`` (the reasoning step's drain is done) a team member
delivers a large payload (``--size`` bytes of hint text, so the drain's
reply takes a while to read); when the UI sees ``REPLY_END`` the user
presses stop once. The landing site of every cancel is noted as in
``trace_cancels.py``. Outcome per try: ``payload lost`` (in neither the
stored context nor the inbox), ``kept``.

Exit codes: 1 when a try lost its payload (confirmed); 0 when none did
and some stop was published while an inbox drain was in flight (with
``--with-fix``: the fix holds); 2 when none was (window not hit), or when
redis-server cannot be started; 3 when a try crashed or the script failed.

Run (from the repository root, with the python of the release to test):

    PYTHONPATH=. python docs/findings/confirm/f18_stop_in_inbox_drain.py [--tries N] [--with-fix]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _app import SCRIPT_ERROR, VERSION, App, app_on, hint, say  # noqa: E402
from _redis import RedisServerUnavailable, redis_server  # noqa: E402
from agentscope.app.message_bus import MessageBusKeys  # noqa: E402
from trace_cancels import TRACER, CountingMixin, Try, table, traced_task_factory  # noqa: E402

from fakes.model import Text  # noqa: E402


async def stop_in_turn_tail(app: App, t: Try, size: int) -> None:
    """One try: its outcome into ``t``."""
    agent = await app.add_agent("solo")
    script = f"solo-f18-{t.number}"
    session = await app.add_session(agent, script)
    ui = await app.tap(session)
    app.script(script).add(Text("noted"))
    payload = f"team: report {t.number} " + "x" * size

    async def team_member() -> None:
        await ui.wait_for("MODEL_CALL_START")
        await app.deliver(agent, session, hint(payload, "team member"))

    async def user() -> None:
        await ui.wait_for("REPLY_END")
        t.presses.append(f"stop {await app.press_stop(agent, session)}")

    parties = [asyncio.create_task(team_member()), asyncio.create_task(user())]
    TRACER.on = True
    await app.post_chat(agent, session, "what is new?")
    await asyncio.wait(parties, timeout=10)
    await app.settle(timeout=10.0)
    TRACER.on = False
    stored = payload in await app.context_texts(agent, session)
    queued = payload[:40] in str(await app.bus.queue_drain(MessageBusKeys.inbox(session)))
    t.outcome = "kept" if stored or queued else "payload lost"
    t.detail = f"stored: {stored}, in inbox: {queued}"


class DrainWatch:
    """Notes whether the stop was published while an inbox drain was in
    flight (the window, with the fix as without). Delays nothing."""

    drains = 0
    stop_during_drain = False

    async def queue_drain(self, key, max_count=100):
        inbox = key.startswith(MessageBusKeys.inbox(""))
        self.drains += inbox
        try:
            return await super().queue_drain(key, max_count)
        finally:
            self.drains -= inbox

    async def publish(self, key, payload):
        if key == MessageBusKeys.session_interrupt_channel() and self.drains:
            self.stop_during_drain = True
        return await super().publish(key, payload)


def watching_redis_bus(port: int):
    from agentscope.app.message_bus import RedisMessageBus

    class WatchingRedisBus(DrainWatch, CountingMixin, RedisMessageBus):
        pass

    return WatchingRedisBus("127.0.0.1", port)


async def main(args: argparse.Namespace) -> int:
    asyncio.get_running_loop().set_task_factory(traced_task_factory)
    tries: list[Try] = []
    in_drain = 0
    try:
        async with redis_server("f18") as server:
            async with watching_redis_bus(server.port) as bus:
                say(f"== F18 on RedisMessageBus (redis-server :{server.port}), {args.tries} tries, "
                    f"{args.size} bytes of payload (agentscope {VERSION})")
                for number in range(1, args.tries + 1):
                    t = Try("f18", number)
                    bus.reset_counts()
                    bus.stop_during_drain = False
                    TRACER.landings = []
                    try:
                        async with app_on(bus) as app:
                            await stop_in_turn_tail(app, t, args.size)
                    except Exception as exc:  # noqa: BLE001 - the script's own failure
                        say(f"ERROR: try {number} crashed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                        return SCRIPT_ERROR
                    t.landings = list(TRACER.landings)
                    in_drain += bus.stop_during_drain
                    say(f"   try {number}: {t.outcome}; {'; '.join(t.presses)}; {t.detail}")
                    say(f"      {t.path()}")
                    tries.append(t)
    except RedisServerUnavailable as exc:
        say(f"ERROR: {exc}")
        return 2
    say("-- paths")
    table(tries)
    lost = sum(t.outcome == "payload lost" for t in tries)
    say(f"payload lost in {lost} of {len(tries)} tries; the stop was published during a drain in {in_drain}")
    if lost:
        say(f"CONFIRMED on agentscope {VERSION}: a stop landing in an inbox drain lost the payload")
        return 1
    if not in_drain:
        say(f"window not hit on agentscope {VERSION}: no stop was published during a drain")
        return 2
    say(f"not reproduced on agentscope {VERSION}: every payload kept")
    return 0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--size", type=int, default=4_000_000)
    parser.add_argument("--with-fix", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    if arguments.with_fix:
        import reference_fix

        say("reference fixes applied: " + ", ".join(p.name for p in reference_fix.apply()))
    sys.exit(asyncio.run(main(arguments)))
