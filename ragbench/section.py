"""The base of every config section: strict, so an unknown key (a typo) is refused instead of silently
ignored, and frozen, so a section handed to a step cannot change under it. Each section lives beside the
domain it configures; only `ragbench.config` composes them into the whole config."""

from pydantic import BaseModel, ConfigDict, ValidationError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def validation_message(error: ValidationError) -> str:
    """A config's validation errors as people read them: one line per key, its dotted path first."""
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"]) or "(top level)"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key"
        lines.append(f"  {location}: {message}")
    return "invalid config:\n" + "\n".join(lines)
