"""A chat model whose every reply is written in advance by the test.

agentscope builds a session's model itself, from the stored credential its
``ChatModelConfig`` points at. So the fake is reached the same way a real
provider is: :class:`ScriptedCredential` is a registered credential type
whose chat model class is :class:`ScriptedChatModel`. The credential names a
:class:`ScriptBook` (one per world) and the config's ``model`` field names
the :class:`ModelScript` to play inside it.

A model call pops the script's next :class:`Turn` and answers with it; an
empty script answers ``"done"``. Nothing here does I/O, sleeps, or reads
the clock.

Implements agentscope's ``ChatModelBase`` (through a registered
``CredentialBase`` type). Stands in for an LLM provider; differs in that
answers are scripted per agent and never stream in chunks: a streaming
story holds the whole call at one switch point instead
(:attr:`ScriptBook.while_answering`).
"""
from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from agentscope.credential import CredentialBase, CredentialFactory
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import TextBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse

#: What an empty script answers.
DEFAULT_REPLY = "done"

#: Stands in for the wall-clock ``created_at`` agentscope would stamp.
FIXED_CREATED_AT = "2026-01-01T00:00:00"


# --------------------------------------------------------------------------
# Turns: what one model call answers
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class CallTool:
    """Answer with one tool call."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CallTools:
    """Answer with several tool calls in the same turn."""

    calls: tuple[CallTool, ...]


@dataclass(frozen=True)
class Text:
    """Answer with plain text, which ends the reply."""

    text: str


@dataclass(frozen=True)
class Fail:
    """Make the model call raise :class:`ScriptedModelError`."""

    message: str


Turn = CallTool | CallTools | Text | Fail


class ScriptedModelError(RuntimeError):
    """Raised by a model call whose scripted turn is :class:`Fail`."""


# --------------------------------------------------------------------------
# Scripts and the book that holds them
# --------------------------------------------------------------------------


@dataclass
class ModelScript:
    """The turns one session's model will answer, in order."""

    name: str
    turns: deque[Turn] = field(default_factory=deque)
    served: int = 0
    when_empty: tuple[Turn, ...] = ()
    """Turns played in a cycle once the script is used up (a team worker
    must report with ``TeamSay`` before it may end its reply)."""
    _idle_turns: int = 0

    def add(self, *turns: Turn) -> "ModelScript":
        """Append turns; returns the script so calls can be chained."""
        self.turns.extend(turns)
        return self

    def take(self) -> Turn | None:
        """Pop the next turn, ``None`` when the script is used up."""
        self.served += 1
        if self.turns:
            return self.turns.popleft()
        if not self.when_empty:
            return None
        turn = self.when_empty[self._idle_turns % len(self.when_empty)]
        self._idle_turns += 1
        return turn


class ScriptBook:
    """Every script of one world.

    Books are found by name from a class-level shelf, because agentscope
    builds the model from stored data only and the name is the one piece
    of harness state that survives that trip.
    """

    _shelf: dict[str, "ScriptBook"] = {}

    def __init__(self, name: str) -> None:
        self.name = name
        self.scripts: dict[str, ModelScript] = {}
        #: Awaited by every model call after it has taken its turn and
        #: before it answers (with the script's name): where a harness
        #: holds a reply "while the model is streaming", so a cancel can
        #: land inside the model call. ``None``: answers come at once.
        self.while_answering: Callable[[str], Awaitable[None]] | None = None
        #: Scripts whose :class:`Fail` turn was served (the fault fired),
        #: in order.
        self.failed: list[str] = []

    @classmethod
    def open(cls, name: str) -> "ScriptBook":
        """Create a book and put it on the shelf under ``name``."""
        if name in cls._shelf:
            raise ValueError(f"a script book named {name!r} is already open")
        book = cls(name)
        cls._shelf[name] = book
        return book

    @classmethod
    def find(cls, name: str) -> "ScriptBook":
        """The open book called ``name``."""
        try:
            return cls._shelf[name]
        except KeyError:
            raise LookupError(f"no open script book named {name!r}") from None

    def close(self) -> None:
        """Take the book off the shelf."""
        self._shelf.pop(self.name, None)

    def script(self, name: str) -> ModelScript:
        """The script called ``name``, created empty on first use."""
        if name not in self.scripts:
            self.scripts[name] = ModelScript(name)
        return self.scripts[name]

    def serve(self, script_name: str) -> ChatResponse:
        """Answer one model call from the named script."""
        script = self.script(script_name)
        turn = script.take()
        if isinstance(turn, Fail):
            self.failed.append(script_name)
        return _response_for(turn, script_name, script.served)


# --------------------------------------------------------------------------
# The agentscope side: credential type and model class
# --------------------------------------------------------------------------


class ScriptedCredential(CredentialBase):
    """A credential that only says which script book to read."""

    type: Literal["scripted"] = "scripted"
    book: str

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return ScriptedChatModel


def register_scripted_credential() -> None:
    """Teach agentscope the ``scripted`` credential type (idempotent)."""
    CredentialFactory.register_credential(ScriptedCredential)


class ScriptedChatModel(ChatModelBase):
    """Plays the script named by the session's model config."""

    class Parameters(BaseModel):
        """The fake takes no parameters."""

    def __init__(
        self,
        credential: ScriptedCredential,
        model: str,
        parameters: BaseModel | None = None,
        **_ignored: Any,
    ) -> None:
        super().__init__(
            credential=credential,
            model=model,
            parameters=parameters or self.Parameters(),
            stream=False,
            max_retries=0,
            retry_delay=0.0,
        )
        self.formatter = OpenAIChatFormatter()

    @classmethod
    def list_models(cls, custom_yaml_dir: str | None = None) -> list:
        """No model cards: skips the base class' directory scan."""
        return []

    async def _call_api(
        self,
        model_name: str,
        messages: list,
        tools: list[dict] | None = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatResponse:
        book = ScriptBook.find(self.credential.book)
        response = book.serve(model_name)
        if book.while_answering is not None:
            await book.while_answering(model_name)
        return response


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def _response_for(turn: Turn | None, script: str, number: int) -> ChatResponse:
    """Turn a scripted turn into the response agentscope expects."""
    if isinstance(turn, Fail):
        raise ScriptedModelError(turn.message)
    if isinstance(turn, Text):
        content: list = [TextBlock(text=turn.text)]
    elif isinstance(turn, CallTool):
        content = [_tool_call_block(turn, script, number, 0)]
    elif isinstance(turn, CallTools):
        content = [
            _tool_call_block(call, script, number, index)
            for index, call in enumerate(turn.calls)
        ]
    else:
        content = [TextBlock(text=DEFAULT_REPLY)]
    return ChatResponse(
        content=content,
        is_last=True,
        created_at=FIXED_CREATED_AT,
    )


def _tool_call_block(
    call: CallTool,
    script: str,
    number: int,
    index: int,
) -> ToolCallBlock:
    """A tool call block whose id says which script turn made it."""
    return ToolCallBlock(
        id=f"call-{script}-{number}-{index}",
        name=call.name,
        input=json.dumps(call.args),
    )
