"""A cell's end-to-end columns: answers produced and failed, keyword failure rates, judge means, latency,
tokens and cost, each with the number of cases behind it, and the per-case values the means are made of."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from ragbench.generation.answers import AnswerSet
from ragbench.grid.cell import CellSpec
from ragbench.llm.types import nearest_rank_percentile, total_cost
from ragbench.retrieval.measures import INDEX_COST_COLUMNS, is_retrieval_column
from ragbench.scoring.cells import JudgeResult
from ragbench.scoring.keyword_tests import KeywordReport, suite_column

# A results row's columns that are neither axes (`CellSpec.axes`), retrieval metrics nor index costs
# (`ragbench.retrieval.measures`), nor have a reserved prefix or suffix: what identifies a row and counts
# its work. A metric's column may take none of these names (`is_results_column`); a test builds real rows
# and checks that each of their non-metric columns is one.
ROW_COLUMNS = frozenset(
    {
        *("cell", "external", "label", "reused", "judge_check", "race"),
        *("chunks", "chunks_truncated", "chunks_per_s", "retrieval_cases", "rerank_ms_per_query"),
        *("e2e_cases", "answers_produced", "cost_usd", "rewrite_calls", "rewrite_failures"),
    }
)
# A metric's intervals and case counts (`<column>_low`, `_high`, `_cases`), the suites' failure rates
# (`fail_<suite>`), and the usage, latency and index columns.
RESERVED_SUFFIXES = ("_cases", "_low", "_high", "_corrected", "_labels")
RESERVED_PREFIXES = ("fail_", "reader_", "judge_", "index_", "latency_")


def is_results_column(name: str) -> bool:
    """Whether a results row has, or may have, a column `name` of its own that a metric would overwrite."""
    return (
        name in ROW_COLUMNS
        or name in CellSpec.axes()
        or name in INDEX_COST_COLUMNS
        or is_retrieval_column(name)
        or name.endswith(RESERVED_SUFFIXES)
        or name.startswith(RESERVED_PREFIXES)
    )


def _rounded_cost(costs: Iterable[float | None]) -> float | None:
    total = total_cost(costs)
    return None if total is None else round(total, 6)


def generation_case_values(keyword: KeywordReport | None, judged: JudgeResult | None) -> dict:
    """Per case, the value behind each end-to-end column that is a mean over cases (column -> case id ->
    value), with the same cases the means use: tested suites, scored verdicts only."""
    values: dict[str, dict[str, float]] = {}
    if keyword is not None:
        values |= {suite_column(suite): dict(outcomes) for suite, outcomes in keyword.outcomes.items()}
    if judged is not None:
        values |= judged.case_values()
    return {column: by_case for column, by_case in values.items() if by_case}


def generation_columns(
    answer_set: AnswerSet, keyword: KeywordReport | None, judged: JudgeResult | None
) -> dict:
    """The end-to-end columns of a results row; each `*_cases` column says how many cases it used."""
    answers = answer_set.answers
    produced = [answer for answer in answers if answer.answer is not None]
    # Every answer's latency, a cached one's as measured when it was made: a cell's latency must not
    # depend on which of its calls another cell had already cached (the gate compares it across runs).
    latencies = [answer.latency_s for answer in produced]
    row: dict = {
        "e2e_cases": len(answers),
        "answers_produced": len(produced),
        "reader_failures": len(answers) - len(produced),
    }
    if keyword is not None:
        for suite, result in keyword.suites.items():
            row[suite_column(suite)] = result.failure_rate
            row[f"{suite_column(suite)}_cases"] = result.cases_tested
    if judged is not None:
        summary = judged.summary
        for column, mean in summary.means.items():
            row[column] = mean
            row[f"{column}_cases"] = summary.scored[column]
        row["judge_parse_failures"] = sum(summary.failures.values())
    judgements = judged.judgements if judged is not None else []
    row.update(
        {
            "latency_mean_s": round(statistics.fmean(latencies), 3) if latencies else None,
            "latency_p95_s": round(nearest_rank_percentile(latencies, 0.95), 3) if latencies else None,
            "reader_prompt_tokens": sum(answer.prompt_tokens for answer in answers),
            "reader_completion_tokens": sum(answer.completion_tokens for answer in answers),
            "reader_cost_usd": _rounded_cost(answer.cost_usd for answer in answers),
            "reader_retries": sum(answer.retries for answer in answers),
            "reader_calls_retried": sum(answer.retried_earlier_failure for answer in answers),
        }
    )
    if judged is not None:
        row.update(
            {
                "judge_prompt_tokens": sum(j.prompt_tokens for j in judgements),
                "judge_completion_tokens": sum(j.completion_tokens for j in judgements),
                "judge_cost_usd": _rounded_cost(j.cost_usd for j in judgements),
                "judge_retries": sum(j.retries for j in judgements),
                "judge_json_reasks": sum(j.json_reasks for j in judgements),
                "judge_calls_retried": sum(j.calls_retried for j in judgements),
            }
        )
    row["cost_usd"] = _rounded_cost([row["reader_cost_usd"], row.get("judge_cost_usd", 0.0)])
    return row
