from ragbench.eval_cases import EvalCase
from ragbench.generation import AnswerEvaluation, AnswerSet, generation_columns, sample_cases
from ragbench.judge import Judgement, summarise_judgements
from ragbench.keyword_tests import run_keyword_tests
from ragbench.reader import ReaderAnswer
from ragbench.results import keyword_failure_rows, weak_answer_rows

CASES = [EvalCase(id=f"c{i}", question=f"q{i}", good_words=["yes"]) for i in range(10)]


def test_sample_is_seeded_ordered_and_the_same_for_every_call():
    first = sample_cases(CASES, 4, seed=7)
    assert first == sample_cases(CASES, 4, seed=7)
    assert [case.id for case in first] == sorted((case.id for case in first), key=lambda i: int(i[1:]))
    assert len(first) == 4
    assert sample_cases(CASES, 4, seed=8) != first
    assert sample_cases(CASES, None, seed=7) == CASES
    assert sample_cases(CASES, 50, seed=7) == CASES


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


def cell_outputs() -> tuple[AnswerSet, AnswerEvaluation]:
    """Three cases: c0 right, c1 wrong (keyword failure, unscorable verdict), c2 the reader failed."""
    answers = [
        answer("c0", "yes", 1.0),
        answer("c1", "no", 3.0, retries=2),
        answer("c2", None, 0.0, retries=3),
    ]
    answer_set = AnswerSet(
        cell_id="cell",
        chunk_size=128,
        embedding_model="m",
        reranker=None,
        reader_model="openai/x",
        top_k=30,
        top_n=3,
        answers=answers,
    )
    judgements = [
        Judgement(case_id="c0", correctness=5, correctness_reasoning="right", prompt_tokens=50, cost_usd=0.5),
        Judgement(
            case_id="c1",
            correctness_error="json_invalid: score 9",
            prompt_tokens=70,
            json_reasks=1,
            retries=1,
        ),
    ]
    evaluation = AnswerEvaluation(
        cell_id="cell",
        keyword=run_keyword_tests(CASES[:3], {"c0": "yes", "c1": "no"}),
        judgements=judgements,
        judge_summary=summarise_judgements(judgements),
        judge_model="openai/judge",
    )
    return answer_set, evaluation


def test_columns_count_failures_and_exclude_unscored_judgements():
    answer_set, evaluation = cell_outputs()
    row = generation_columns(answer_set, evaluation)
    assert row["reranker"] == "off"
    assert row["e2e_cases"] == 3 and row["answers_produced"] == 2 and row["reader_failures"] == 1
    assert row["fail_good_answers"] == 0.5 and row["fail_good_answers_cases"] == 2
    assert row["correctness_0to1"] == 1.0 and row["correctness_cases"] == 1
    assert row["judge_parse_failures"] == 1
    assert row["latency_mean_s"] == 2.0 and row["latency_p95_s"] == 3.0
    assert row["reader_prompt_tokens"] == 300 and row["reader_retries"] == 5
    assert row["judge_prompt_tokens"] == 120 and row["judge_cost_usd"] == 0.5
    assert row["judge_retries"] == 1 and row["judge_json_reasks"] == 1


def test_report_detail_rows_list_failures_with_their_evidence():
    answer_set, evaluation = cell_outputs()
    assert keyword_failure_rows([evaluation]) == [
        {"cell": "cell", "case": "c1", "suite": "good_answers", "word": "yes", "answer": "no"}
    ]
    weak = evaluation.model_copy(
        update={
            "judgements": [
                *evaluation.judgements,
                Judgement(case_id="c0", correctness=2, correctness_reasoning="meh"),
            ]
        }
    )
    rows = weak_answer_rows([answer_set], [weak])
    assert [(r["case"], r["correctness_1to5"], r["judge_reasoning"], r["answer"]) for r in rows] == [
        ("c1", None, "json_invalid: score 9", "no"),  # could not be scored: listed with the reason
        ("c0", 2, "meh", "yes"),
    ]


def test_an_unpriced_model_has_no_cost_rather_than_zero():
    answer_set, evaluation = cell_outputs()
    priced = generation_columns(answer_set, evaluation)
    assert priced["reader_cost_usd"] == 0.0  # the fake answers are priced at 0 (a local model)
    unpriced = answer_set.model_copy(update={"answers": [*answer_set.answers[:2], answer("c2", "x", 1.0)]})
    unpriced.answers[2].cost_usd = None
    assert generation_columns(unpriced, evaluation)["reader_cost_usd"] is None
    judged = evaluation.model_copy(
        update={"judgements": [Judgement(case_id="c0", correctness=5, cost_usd=None)]}
    )
    assert generation_columns(answer_set, judged)["judge_cost_usd"] is None
