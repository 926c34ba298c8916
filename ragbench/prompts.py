"""Reader prompt templates: a grid axis, so a prompt is data (a name and its text), not code.

A template is a system message and a user message. The user message must place ``{passages}`` and
``{question}``; ``{refusal}`` may appear anywhere and becomes the fixed refusal phrase that keyword
tests and the refusal check look for. Placeholders are replaced literally (no ``str.format``), so a
template may contain other braces, such as a JSON example.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

NOT_IN_CONTEXT = "The context does not say."
DEFAULT_PROMPT_NAME = "default"

# Wording chosen by measurement on Qwen2.5-Coder-1.5B (14 eval cases, each once with its answer passage
# and once without): "say nothing about the question" refuses less often on answerable paraphrased
# questions than "do not contain the answer", and the rules in the system message beat rules after the
# passages. Even so the 1.5B model answered 9/14 and declined 9/14 correctly; it rarely cites.
_DEFAULT_SYSTEM = """\
You answer questions using only the numbered context passages given with the question.
Rules:
- Use only facts written in the passages, never your own knowledge.
- Answer in 1 to 3 short sentences.
- End each sentence with the number of the passage it comes from, like [2].
- If the passages say nothing about the question, reply with exactly: {refusal}"""

_DEFAULT_USER = "Context passages:\n\n{passages}\n\nQuestion: {question}"

REQUIRED_PLACEHOLDERS = ("{passages}", "{question}")


class PromptTemplate(BaseModel):
    """A named reader prompt; the name labels cells, the text is what the cache keys on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    system: str = Field(min_length=1)
    user: str = _DEFAULT_USER

    @model_validator(mode="after")
    def _check_placeholders(self) -> PromptTemplate:
        missing = [p for p in REQUIRED_PLACEHOLDERS if p not in self.user]
        if missing:
            raise ValueError(f"prompt {self.name!r}: the user template must contain {', '.join(missing)}")
        return self

    def messages(self, question: str, passages: str) -> list[dict[str, str]]:
        """The chat messages for one question (no model call, so a dry run can count their tokens)."""
        user = self.user.replace("{passages}", passages).replace("{question}", question.strip())
        return [
            {"role": "system", "content": self.system.replace("{refusal}", NOT_IN_CONTEXT)},
            {"role": "user", "content": user.replace("{refusal}", NOT_IN_CONTEXT)},
        ]


DEFAULT_PROMPT = PromptTemplate(name=DEFAULT_PROMPT_NAME, system=_DEFAULT_SYSTEM)


def load_prompt(name: str, value: str | dict) -> PromptTemplate:
    """A config entry: a mapping with system/user text, or the path of a YAML file holding one."""
    if isinstance(value, str):
        path = Path(value)
        if not path.is_file():
            raise ValueError(f"prompts.{name}: file not found: {path}")
        try:
            value = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as error:
            raise ValueError(f"prompts.{name}: {path} is not a readable YAML file: {error}") from None
        if not isinstance(value, dict):
            raise ValueError(f"prompts.{name}: {path} must hold a mapping with 'system' and 'user'")
    return PromptTemplate(name=name, **value)
