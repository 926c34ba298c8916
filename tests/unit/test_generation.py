import pytest

from ragbench.analysis.columns import generation_columns
from ragbench.analysis.results import CellResults, ResultsTable
from ragbench.generation.answers import AnswerSet, case_order, order_slice, sample_cases
from ragbench.generation.reader import ReaderAnswer
from ragbench.grid.cell import CellSpec
from ragbench.inputs.eval_cases import EvalCase
from ragbench.llm.prompts import DEFAULT_PROMPT
from ragbench.llm.types import LLMSettings
from ragbench.report.run_page import keyword_failure_rows, summary_rows, weak_answer_rows
from ragbench.scoring.cells import JudgeResult, keyword_report
from ragbench.scoring.judge import Judgement
from ragbench.scoring.keyword_tests import BUILTIN_SUITES, KeywordReport, run_keyword_tests
from ragbench.scoring.registry import Scoring, present
from ragbench.scoring.rubrics import BUILTIN_RUBRICS

CASES = [EvalCase(id=f"c{i}", question=f"q{i}", good_words=["yes"]) for i in range(10)]


def test_case_order_is_a_seeded_permutation():
    order = case_order(CASES, seed=7)
    assert sorted(order, key=lambda case: int(case.id[1:])) == CASES
    assert order == case_order(CASES, seed=7)
    assert order != case_order(CASES, seed=8)
    assert order != CASES  # shuffled, not file order (this seed)
    assert case_order([], seed=7) == []


def test_sample_is_a_prefix_of_the_order_so_larger_samples_only_add_cases():
    order = case_order(CASES, seed=7)
    for n in range(len(CASES) + 2):
        assert sample_cases(CASES, n, seed=7) == order[:n]
        for k in range(1, 4):
            assert sample_cases(CASES, n + k, seed=7)[:n] == sample_cases(CASES, n, seed=7)
    assert sample_cases(CASES, 4, seed=8) != sample_cases(CASES, 4, seed=7)
    assert sample_cases(CASES, None, seed=7) == order == sample_cases(CASES, 50, seed=7)


def test_order_slices_add_up_to_the_order():
    order = case_order(CASES, seed=3)
    rounds = [order_slice(CASES, 3, start, start + 3) for start in range(0, len(CASES), 3)]
    assert [case for chunk in rounds for case in chunk] == order
    assert order_slice(CASES, 3, 2, 5) == order[2:5] == sample_cases(CASES, 5, seed=3)[2:]


def answer(
    case_id: str, text: str | None, latency: float, cached: bool = False, retries: int = 0
) -> ReaderAnswer:
    return ReaderAnswer(
        case_id=case_id,
        question="q",
        answer=text,
        error=None if text is not None else "retries_exhausted: 500",
        prompt_tokens=100,
        completion_tokens=10,
        latency_s=latency,
        retries=retries,
        cached=cached,
    )


SPEC = CellSpec(
    chunk_size=128,
    chunk_overlap=13,
    embedding_model="m",
    top_k=30,
    top_n=3,
    reader=LLMSettings(model="openai/x"),
    prompt=DEFAULT_PROMPT,
    judge=LLMSettings(model="openai/judge"),
)


def cell_outputs() -> tuple[AnswerSet, KeywordReport, JudgeResult]:
    """Three cases: c0 right, c1 wrong (keyword failure, unscorable verdict), c2 the reader failed."""
    answers = [
        answer("c0", "yes", 1.0),
        answer("c1", "no", 3.0, retries=2),
        answer("c2", None, 0.0, retries=3),
    ]
    answer_set = AnswerSet(spec=SPEC.upto("answer"), reranker=None, answers=answers)
    judgements = [
        Judgement(
            case_id="c0",
            scores={"correctness": 5},
            reasoning={"correctness": "right"},
            prompt_tokens=50,
            cost_usd=0.5,
        ),
        Judgement(
            case_id="c1",
            errors={"correctness": "json_invalid: score 9"},
            prompt_tokens=70,
            json_reasks=1,
            retries=1,
        ),
    ]
    judged = JudgeResult(spec=SPEC, rubrics=[BUILTIN_RUBRICS["correctness"]], judgements=judgements)
    return answer_set, keyword_report(answer_set, CASES, BUILTIN_SUITES), judged


def test_keyword_tests_run_on_the_answers_that_exist():
    _, keyword, _ = cell_outputs()
    assert keyword.suites["good_answers"].cases_tested == 2  # c2 failed: neither tested nor counted
    assert keyword == run_keyword_tests(CASES, {"c0": "yes", "c1": "no"}, BUILTIN_SUITES)


def test_columns_count_failures_and_exclude_unscored_judgements():
    row = generation_columns(*cell_outputs())
    assert row["e2e_cases"] == 3 and row["answers_produced"] == 2 and row["reader_failures"] == 1
    assert row["fail_good_answers"] == 0.5 and row["fail_good_answers_cases"] == 2
    assert row["correctness_0to1"] == 1.0 and row["correctness_0to1_cases"] == 1
    assert row["judge_parse_failures"] == 1
    assert row["latency_mean_s"] == 2.0 and row["latency_p95_s"] == 3.0
    assert row["reader_prompt_tokens"] == 300 and row["reader_retries"] == 5
    assert row["judge_prompt_tokens"] == 120 and row["judge_cost_usd"] == 0.5
    assert row["judge_retries"] == 1 and row["judge_json_reasks"] == 1
    assert row["cost_usd"] == 0.5  # reader (local price 0) + judge


def results_of(answer_set: AnswerSet, judged: JudgeResult) -> CellResults:
    return CellResults(
        cells=[SPEC],
        retrievals={},
        answer_sets={answer_set.spec.id: answer_set},
        judged={judged.spec.id: judged},
        keyword={answer_set.spec.id: keyword_report(answer_set, CASES, BUILTIN_SUITES)},
    )


def test_a_cell_is_incomplete_when_a_configured_metric_got_no_value():
    answer_set, _, judged = cell_outputs()
    labels = {SPEC.id: "cell A"}
    assert results_of(answer_set, judged).incomplete(labels) == {}  # one verdict failed, one scored
    down = judged.model_copy(
        update={
            "judgements": [
                Judgement(case_id=j.case_id, errors={"correctness": "retries_exhausted: HTTP 503"})
                for j in judged.judgements
            ]
        }
    )
    (why,) = results_of(answer_set, down).incomplete(labels).values()
    assert why == (
        "the judge could not score correctness on any of its 2 answer(s) in cell cell A; "
        "last error: retries_exhausted: HTTP 503"
    )
    silent = answer_set.model_copy(update={"answers": [answer(f"c{i}", None, 0.0) for i in range(3)]})
    (why,) = results_of(silent, judged.model_copy(update={"judgements": []})).incomplete(labels).values()
    assert why.startswith("every reader call failed in cell cell A; last error: retries_exhausted: 500")


def test_report_detail_rows_list_failures_with_their_evidence():
    answer_set, _, judged = cell_outputs()
    records = results_of(answer_set, judged).case_records()
    assert [r.case_id for r in records.records] == ["c0", "c1", "c2"]
    assert keyword_failure_rows(records) == [
        {"cell": SPEC.id, "case": "c1", "suite": "good_answers", "word": "yes", "answer": "no"}
    ]
    weak = judged.model_copy(
        update={
            "judgements": [
                Judgement(case_id="c0", scores={"correctness": 2}, reasoning={"correctness": "meh"}),
                judged.judgements[1],
            ]
        }
    )
    rows = weak_answer_rows(results_of(answer_set, weak).case_records(), [BUILTIN_RUBRICS["correctness"]])
    assert [(r["case"], r["score"], r["judge_reasoning"], r["answer"]) for r in rows] == [
        ("c0", "correctness 2", "meh", "yes"),
        (
            "c1",
            None,
            "correctness: json_invalid: score 9",
            "no",
        ),  # could not be scored: listed with the reason
    ]


def test_an_unpriced_model_has_no_cost_rather_than_zero():
    answer_set, keyword, judged = cell_outputs()
    priced = generation_columns(answer_set, keyword, judged)
    assert priced["reader_cost_usd"] == 0.0  # the fake answers are priced at 0 (a local model)
    unpriced = answer_set.model_copy(update={"answers": [*answer_set.answers[:2], answer("c2", "x", 1.0)]})
    unpriced.answers[2].cost_usd = None
    assert generation_columns(unpriced, keyword, judged)["reader_cost_usd"] is None
    assert generation_columns(unpriced, keyword, judged)["cost_usd"] is None
    unpriced_judge = judged.model_copy(
        update={"judgements": [Judgement(case_id="c0", scores={"correctness": 5}, cost_usd=None)]}
    )
    assert generation_columns(answer_set, keyword, unpriced_judge)["judge_cost_usd"] is None


def test_terminal_summary_shows_intervals_and_how_many_cases_a_keyword_rate_rests_on():
    row = {"cell": "c", "label": "cs128", "mrr": 0.7996, "fail_good_answers": 1 / 3, "reused": True}
    row |= {"mrr_low": 0.7, "mrr_high": 0.88, "fail_good_answers_low": 0.0, "fail_good_answers_high": 1.0}
    table = ResultsTable(
        title="t",
        rows=[row | {"fail_good_answers_cases": 3, "fail_bad_answers": None, "latency_p95_s": 4.9}],
        headline=present(Scoring(rubrics=(), suites=BUILTIN_SUITES, metrics_k=5).headline(), [row]),
        notes=[],
        warnings=[],
        report_html="",
    )
    (summary,) = summary_rows(table)
    assert summary == {
        "cell": "cs128",
        "fail_good_answers": "0.33 [0.00, 1.00] n=3",
        "mrr": "0.80 [0.70, 0.88]",
        "latency_p95_s": 4.9,
        "reused": "yes",
    }


def test_latency_does_not_depend_on_which_answers_came_from_the_cache():
    """A cached answer keeps the latency of the call that made it, so a cell's latency is the same
    whether another cell had cached some of its prompts (a first run) or all came from the cache."""

    def latency_columns(cached: list[bool]) -> tuple[float, float]:
        answers = [
            answer(f"c{i}", "yes", latency, cached=c)
            for i, (latency, c) in enumerate(zip([1.0, 8.0, 2.0], cached, strict=True))
        ]
        row = generation_columns(
            AnswerSet(spec=SPEC.upto("answer"), reranker=None, answers=answers), None, None
        )
        return row["latency_mean_s"], row["latency_p95_s"]

    assert latency_columns([False, True, False]) == latency_columns([True, True, True]) == (3.667, 8.0)


def test_no_metric_can_take_a_column_an_end_to_end_row_already_has():
    """Every non-metric column of an end-to-end row (axes, counts, usage) is a results column by
    `is_results_column`, so no custom rubric's name can overwrite it: the config refuses it."""
    from ragbench.analysis.columns import is_results_column
    from ragbench.config.model import BenchmarkConfig

    row = {
        "cell": "",
        "label": "",
        "reused": False,
        **SPEC.axis_columns(),
        **generation_columns(*cell_outputs()),
    }
    metrics = {
        "correctness_0to1",
        "fail_good_answers",
        "fail_bad_answers",
        "fail_bad_first_words",
        "fail_declines",
    }
    assert metrics < set(row)
    for column in set(row) - metrics:
        assert is_results_column(column), column
    for column in ("latency_p95_s", "e2e_cases", "reranker"):
        with pytest.raises(ValueError, match="names a results column"):
            BenchmarkConfig.model_validate(
                {"evaluation": {"custom_rubrics": [{"name": column, "criteria": "x"}]}}
            )
    BenchmarkConfig.model_validate({"evaluation": {"custom_rubrics": [{"name": "tone", "criteria": "x"}]}})


def test_two_readers_of_one_model_are_two_cells_everywhere_in_the_results():
    from ragbench.analysis.results import build_results
    from ragbench.analysis.results_inputs import ResultsInputs
    from ragbench.stats.inference import StatisticsConfig

    cold, warm = (
        SPEC.model_copy(update={"reader": LLMSettings(model="openai/x", temperature=t)}) for t in (0.0, 0.9)
    )
    answer_sets, judged = {}, {}
    for spec, score in ((cold, 5), (warm, 1)):
        answers = AnswerSet(
            spec=spec.upto("answer"), reranker=None, answers=[answer(f"c{i}", "yes", 1.0) for i in range(8)]
        )
        answer_sets[answers.spec.id] = answers
        verdicts = [Judgement(case_id=f"c{i}", scores={"correctness": score}) for i in range(8)]
        judged[spec.id] = JudgeResult(
            spec=spec, rubrics=[BUILTIN_RUBRICS["correctness"]], judgements=verdicts
        )
    results = CellResults(
        cells=[cold, warm], retrievals={}, answer_sets=answer_sets, judged=judged, keyword={}
    )
    table, _ = build_results(
        results,
        ResultsInputs(
            title="t",
            scoring=Scoring(rubrics=(BUILTIN_RUBRICS["correctness"],), suites=(), metrics_k=5),
            statistics=StatisticsConfig(),
        ),
    )
    labels = [row["label"] for row in table.rows]
    assert labels == ["openai/x (temperature 0.0)", "openai/x (temperature 0.9)"]
    (verdict,) = [v for v in table.verdicts if v.column == "correctness_0to1"]
    assert verdict.best == cold.id and [c.candidate for c in verdict.comparisons] == [warm.id]
    assert verdict.name(warm.id) == labels[1] and "openai/x (temperature 0.9)" in verdict.sentence()
    assert set(table.case_values) == {cold.id, warm.id}
