"""Numbers within a tolerance (`tolerance` on a case): an answer whose number is within, say, 30% of the
reference's is equivalent to it. Decided here, without the judge, when both texts carry a number the
comparison can rest on; otherwise the judge is told the tolerance (`Rubric.messages`)."""

from __future__ import annotations

import re

from pydantic import BaseModel

# A citation marker the reader adds ("[2]", "[1, 3]"): not a number of the answer.
_CITATION = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w.]*\d)")


def numbers_in(text: str) -> list[float]:
    """The numbers written in `text` (thousands separators allowed), citation markers left out; a dotted
    version such as 3.12.1 is not a number."""
    return [float(match.replace(",", "")) for match in _NUMBER.findall(_CITATION.sub(" ", text))]


class NumericVerdict(BaseModel):
    """Whether an answer's number is within the tolerance of the reference's, and why."""

    within: bool
    reason: str


def numeric_verdict(reference: str, answer: str, tolerance: float) -> NumericVerdict | None:
    """Decided when the reference carries exactly one number and the answer at least one: within when one
    of the answer's numbers is within `tolerance` (relative) of the reference's. None: for the judge."""
    expected, given = numbers_in(reference), numbers_in(answer)
    if len(expected) != 1 or not given:
        return None
    target = expected[0]
    allowed = abs(target) * tolerance
    closest = min(given, key=lambda number: abs(number - target))
    within = abs(closest - target) <= allowed
    return NumericVerdict(
        within=within,
        reason=f"decided without the judge: the answer's {closest:g} is {'within' if within else 'outside'} "
        f"{tolerance * 100:g}% of the reference's {target:g}",
    )
