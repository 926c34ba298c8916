"""How an interval is written, everywhere a number is shown with one (the terminal, the report, the review
page, the run record's comparisons): ``[low, high]``, each bound written as `number_text` writes a value.

The variants are named options, each kept because a reader meets it where it is: `digits` decimals (2 in
the terminal's sentences, 3 in the paired-change and label-corrected lines), or `significant` figures as the
report's tables write every value; `signed` for a difference, so ``[-0.12, +0.05]`` reads as around zero;
`percent` for a rate; `percent_range` for a rate inside a parenthesis, ``53-98%``, as the judge card has
written it from the start (README and the first-run page show it recorded).

Imports nothing of ragbench, so every layer may import it.
"""

from __future__ import annotations

# From here on a significant-figures value is written whole: `.4g` would switch to an exponent (1.235e+05)
LARGE = 1e5


def number_text(
    value: float, *, digits: int = 3, significant: bool = False, signed: bool = False, percent: bool = False
) -> str:
    """One value: `digits` decimals, else (`significant`) that many significant figures and whole from
    `LARGE` up; with a sign always (`signed`); as a percentage (`percent`)."""
    sign = "+" if signed else ""
    if percent:
        return f"{value:{sign}.{digits}%}"
    if significant:
        return f"{value:{sign}.{digits}g}" if abs(value) < LARGE else f"{value:{sign}.0f}"
    return f"{value:{sign}.{digits}f}"


def interval_text(
    low: float | None,
    high: float | None,
    *,
    digits: int = 3,
    significant: bool = False,
    signed: bool = False,
    percent: bool = False,
    percent_range: bool = False,
) -> str:
    """``[low, high]`` with both bounds written alike (`number_text`'s options), or empty when either is
    missing (an interval not computed, or stored before there was one). `percent_range`: ``53-98%``, the
    bounds as percentages with `digits` decimals and one percent sign."""
    if low is None or high is None:
        return ""
    if percent_range:
        return f"{low * 100:.{digits}f}-{high * 100:.{digits}f}%"
    options = {"digits": digits, "significant": significant, "signed": signed, "percent": percent}
    return f"[{number_text(low, **options)}, {number_text(high, **options)}]"
