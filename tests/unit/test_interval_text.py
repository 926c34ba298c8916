"""One interval formatter (`ragbench.stats.formatting`) behind every interval the project prints: each named
option writes what the site it replaced wrote, so the terminal, the report and the recorded outputs read as
before."""

import pytest

from ragbench.report.pages import format_value, interval_cell
from ragbench.stats.formatting import interval_text, number_text

BOUNDS = [(0.5, 1.0), (-0.1234567, 0.0456789), (0.0, 0.0), (-0.005, 0.995), (1.0 / 3, 2.0 / 3)]


@pytest.mark.parametrize(("low", "high"), BOUNDS)
def test_each_option_writes_what_its_sites_wrote_before(low, high):
    assert interval_text(low, high, digits=2) == f"[{low:.2f}, {high:.2f}]"  # terminal, ppi, kappa
    assert interval_text(low, high, digits=3) == f"[{low:.3f}, {high:.3f}]"
    assert interval_text(low, high, digits=2, signed=True) == f"[{low:+.2f}, {high:+.2f}]"  # kappa change
    assert interval_text(low, high, digits=3, signed=True) == f"[{low:+.3f}, {high:+.3f}]"  # paired change
    assert interval_text(low, high, digits=3, significant=True) == f"[{low:.3g}, {high:.3g}]"  # comparisons
    assert interval_text(low, high, digits=1, percent=True) == f"[{low:.1%}, {high:.1%}]"  # pairwise win rate
    judge_card = f"{low * 100:.0f}-{high * 100:.0f}%"
    assert interval_text(low, high, digits=0, percent_range=True) == judge_card
    table = f"[{format_value(round(low, 4))}, {format_value(round(high, 4))}]"  # the report's tables
    assert interval_text(round(low, 4), round(high, 4), digits=4, significant=True) == table
    assert interval_cell(low, high) == table


def test_a_missing_bound_writes_nothing():
    for low, high in [(None, 0.5), (0.5, None), (None, None)]:
        assert interval_text(low, high) == ""
        assert interval_cell(low, high) == ""


def test_significant_figures_are_whole_from_1e5_as_the_report_tables_write_values():
    assert number_text(123456.7, digits=4, significant=True) == "123457" == format_value(123456.7)
    assert number_text(0.000123456, digits=4, significant=True) == "0.0001235" == format_value(0.000123456)
    assert interval_text(99999.0, 123456.0, digits=4, significant=True) == "[1e+05, 123456]"


def test_the_label_corrected_table_rounds_its_intervals_as_its_values():
    """It wrote [0.500, 1.000] beside values written 0.5 and 1: now as every report table, [0.5, 1]."""
    assert interval_cell(0.5, 1.0, decimals=3) == "[0.5, 1]"
    assert interval_cell(0.12345, 0.6789, decimals=3) == "[0.123, 0.679]"
