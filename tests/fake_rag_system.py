"""A RAG system as a Python callable, for ragbench's `python: "tests.fake_rag_system:answer"` systems.

`answer` ranks a tiny built-in knowledge base by word overlap with the question and returns
``{"answer": ..., "contexts": [{"text": ..., "source": ...}]}``; `flaky` raises RuntimeError the first
time it sees a question and answers it after (for retry tests); `not_a_mapping` returns a bare string
(an invalid reply). Every call of any of them adds one to `CALLS` under a lock; `reset()` zeroes it and
forgets the questions `flaky` has seen.

Import it as ``tests.fake_rag_system`` in tests, the name the system's target uses, so that the test
and the client read the same module (and the same counter).
"""

from __future__ import annotations

import re
import threading
from typing import Any

KNOWLEDGE_BASE: tuple[tuple[str, str], ...] = (
    ("kb/returns.md", "Items can be returned within 30 days of delivery for a full refund."),
    ("kb/shipping.md", "Orders ship within two business days; express shipping takes one day."),
    ("kb/warranty.md", "Every device carries a two year warranty against manufacturing defects."),
)
TOP_K = 2

CALLS = 0
_LOCK = threading.Lock()
_FAILED_ONCE: set[str] = set()


def reset() -> None:
    """Zero the call counter and forget the questions `flaky` failed on."""
    global CALLS
    with _LOCK:
        CALLS = 0
        _FAILED_ONCE.clear()


def _count() -> None:
    global CALLS
    with _LOCK:
        CALLS += 1


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _reply(question: str) -> dict[str, Any]:
    asked = _words(question)
    ranked = sorted(
        range(len(KNOWLEDGE_BASE)), key=lambda i: (-len(asked & _words(KNOWLEDGE_BASE[i][1])), i)
    )[:TOP_K]
    contexts = [{"text": KNOWLEDGE_BASE[i][1], "source": KNOWLEDGE_BASE[i][0]} for i in ranked]
    return {"answer": f"{contexts[0]['text']} (asked: {question})", "contexts": contexts}


def answer(question: str) -> dict[str, Any]:
    """The answer with its top passages and their sources, in rank order."""
    _count()
    return _reply(question)


def flaky(question: str) -> dict[str, Any]:
    """Like `answer`, but the first call for each question raises RuntimeError."""
    _count()
    with _LOCK:
        first = question not in _FAILED_ONCE
        _FAILED_ONCE.add(question)
    if first:
        raise RuntimeError(f"temporarily unavailable for {question!r}")
    return _reply(question)


def not_a_mapping(question: str) -> str:
    """A system that returns a bare string instead of {answer, contexts}."""
    _count()
    return f"just text for {question}"


HISTORIES: list[list[dict[str, str]]] = []  # every conversation `converse` was given, in call order


def converse(question: str, history: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A system in conversation: searches with the earlier user turns and the question together, and
    records the `history` it was given in `HISTORIES`."""
    _count()
    with _LOCK:
        HISTORIES.append(list(history or []))
    earlier = " ".join(turn["content"] for turn in history or [] if turn["role"] == "user")
    return _reply(f"{earlier} {question}".strip())
