"""Structured output: how a schema is requested, and how a reply is turned into a validated dict.

Models wrap JSON in ```json fences or chatty prose even in JSON mode, so parsing is tolerant; the
schema decides what is valid, and a failure produces a message the model can act on when re-asked.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from ragbench.llm.types import Message

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_MAX_ERROR_CHARS = 600


def schema_json(schema: type[BaseModel]) -> dict[str, Any]:
    return schema.model_json_schema()


def schema_instruction(schema: type[BaseModel]) -> str:
    """Stated in the prompt in every JSON mode: json_object mode alone does not convey the fields."""
    return (
        "Reply with a single JSON object and nothing else (no prose, no code fences). "
        "It must validate against this JSON Schema:\n"
        + json.dumps(schema_json(schema), ensure_ascii=False, separators=(",", ":"))
    )


def with_schema_instruction(messages: list[Message], schema: type[BaseModel]) -> list[Message]:
    """Append the instruction to the leading system message (or add one) without mutating the input."""
    instruction = schema_instruction(schema)
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        first = {**messages[0], "content": f"{messages[0]['content']}\n\n{instruction}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def reask_messages(invalid_text: str, problem: str) -> list[Message]:
    """The follow-up turn after an invalid reply: show it the output and the error, ask again."""
    return [
        {"role": "assistant", "content": invalid_text},
        {
            "role": "user",
            "content": "That reply is not valid: "
            f"{problem}\nReply again with only the corrected JSON object that matches the schema.",
        },
    ]


def extract_json_object(text: str) -> Any:
    """The first JSON object in `text`: whole text, a fenced block, or the first decodable {...}.

    Raises ValueError when there is none.
    """
    stripped = text.strip()
    candidates = [stripped, *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise ValueError("no JSON object found in the reply")


def parse_structured(text: str, schema: type[BaseModel]) -> tuple[dict[str, Any] | None, str | None]:
    """(validated dict, None) or (None, a short description of what is wrong)."""
    try:
        data = extract_json_object(text)
    except ValueError as error:
        return None, str(error)
    try:
        validated = schema.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in item['loc']) or '(object)'}: {item['msg']}" for item in error.errors()
        )
        return None, f"schema validation failed: {problems}"[:_MAX_ERROR_CHARS]
    return validated.model_dump(mode="json"), None
