"""A case's conversation: the turns before its question, and how graders read a question that continues one.

Kept apart from the case schema so that what reads a question (the reference writer of `references`, the
reader's prompt, the judges) renders a conversation one way, importing nothing of the schema."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

__all__ = [
    "ROLES",
    "Role",
    "Turn",
    "check_generated_turns",
    "conversation_text",
    "placeholder_history",
    "question_in_context",
]

Role = Literal["user", "assistant"]
ROLES: tuple[Role, ...] = ("user", "assistant")


class Turn(BaseModel):
    """One earlier message of a conversation the case's question continues.

    An assistant turn is given by default, as written in the case: every cell then reads the same
    conversation, so paired tests compare cells on identical inputs, a cached reply stays the reply to its
    request, and the case is reproducible (its expected sources and reference still hold). Written
    ``{role: assistant, generate: true}`` (no content), it is generated instead: each cell answers the
    conversation so far with its own retrieval and reader, an external system by being asked it
    (`ragbench.generation.turns`), which tests how the system copes with its own earlier answers, at the
    cost of one more call per such turn and cell and of inputs that differ between cells. The turn recorded
    with the answer keeps ``generate`` and holds what the system wrote."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role = Field(description="user or assistant (the system message is the reader prompt's)")
    content: str = Field(
        default="", description="the message's text; blank only for a turn the reader is yet to generate"
    )
    generate: bool = Field(
        default=False,
        description="an assistant turn the system under test writes, per cell (written without content)",
    )

    @field_validator("role", mode="before")
    @classmethod
    def _known_role(cls, value: Any) -> Any:
        if value not in ROLES:
            raise ValueError(
                f"unknown role {value!r}: a turn is the user's or the assistant's ({', '.join(ROLES)})"
            )
        return value

    @field_validator("content")
    @classmethod
    def _stripped(cls, value: str) -> str:
        return value.strip()

    @model_validator(mode="after")
    def _content_or_generated(self) -> Turn:
        if not self.content and not self.generate:
            raise ValueError(
                "an empty turn: every earlier message needs its content (or, an assistant turn the reader "
                "writes, `generate: true`)"
            )
        if self.generate and self.role != "assistant":
            raise ValueError(
                f"a generated turn is the assistant's, not the {self.role}'s: only answers are generated"
            )
        return self

    @model_serializer(mode="wrap")
    def _given_as_before(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A given turn dumps as ``{role, content}`` as it did before turns could be generated, so an eval
        set's fingerprint (and the runs it lines up) does not change."""
        dumped = handler(self)
        if not self.generate:
            dumped.pop("generate", None)
        return dumped

    @property
    def pending(self) -> bool:
        """A generated turn whose text the reader has not written yet (the case as loaded)."""
        return self.generate and not self.content

    def message(self) -> dict[str, str]:
        """The turn as a chat message (OpenAI-style), what a reader and an external system receive."""
        if self.pending:
            raise ValueError("a generated turn has no text until the cell's reader writes it")
        return {"role": self.role, "content": self.content}


def check_generated_turns(history: Sequence[Turn]) -> None:
    """A case's generated turns as loaded: without content (the reader writes it; a written answer is a
    given turn) and each right after a user turn, whose message it answers. Raises ValueError."""
    for number, turn in enumerate(history, start=1):
        if not turn.generate:
            continue
        if turn.content:
            raise ValueError(
                f"turn {number} is generated and has content: drop `generate` to give the answer, or the "
                "content to let the reader write it"
            )
        if number == 1 or history[number - 2].role != "user":
            raise ValueError(
                f"turn {number} is generated but does not follow a user turn: the reader answers a "
                "user's message"
            )


def placeholder_history(history: Sequence[Turn], answer: str) -> list[Turn]:
    """The history with every generated turn not yet written standing as `answer`: what a plan or a check
    before the run counts the conversation's tokens on (the reply's length is a guess, e.g. max_tokens)."""
    return [turn.model_copy(update={"content": answer}) if turn.pending else turn for turn in history]


def conversation_text(history: Sequence[Turn]) -> str:
    """The earlier turns as people (and a judge) read them, one ``User:``/``Assistant:`` line each. A
    generated turn not written yet is left out: what reads the conversation before any cell answers (the
    query rewrite, the reference writer) reads its given turns."""
    return "\n".join(f"{turn.role.capitalize()}: {turn.content}" for turn in history if not turn.pending)


def question_in_context(question: str, history: Sequence[Turn]) -> str:
    """What a grader reads as the question: the question alone, or, after earlier turns, the conversation
    followed by it, so "and what is its default?" is graded as the question it is."""
    if not history:
        return question
    return f"{conversation_text(history)}\nUser (the question to answer): {question}"
