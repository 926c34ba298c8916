"""The dry run's estimate holds to the assumption it prints (`ANSWER_ASSUMPTION`)."""

from ragbench.config.dry_run import ANSWER_ASSUMPTION, plan_rows
from ragbench.config.model import load_config
from ragbench.inputs.eval_cases import EvalCase
from tests.projects import write_project

CASES = [{"id": "a", "question": "What is a?", "reference_answer": "A.", "expected_sources": ["a.md"]}]


def estimate(tmp_path, max_tokens: int) -> dict:
    write_project(
        tmp_path,
        {"a.md": "# A\nA is the first letter."},
        CASES,
        "grid: {chunk_size: [64], embedding_model: [m], reader: [openai/r], judge: [openai/j]}\n"
        f"generation: {{reader: {{max_tokens: {max_tokens}}}}}\n"
        "evaluation: {rubrics: [correctness], judge_check: null}\n",
    )
    (row,) = plan_rows(
        load_config(tmp_path / "config.yaml"), [EvalCase.model_validate(c) for c in CASES], set()
    )
    return row


def test_a_judge_reads_answers_as_long_as_the_reader_is_priced_for(tmp_path):
    """One answer judged once: a reader allowed 200 more tokens costs 200 more completion tokens and
    about 200 more judge prompt tokens (one placeholder word is about one token)."""
    assert "max_tokens" in ANSWER_ASSUMPTION and "judges read answers that long" in ANSWER_ASSUMPTION
    short, long = estimate(tmp_path / "short", 100), estimate(tmp_path / "long", 300)
    assert long["completion_tokens_max"] - short["completion_tokens_max"] == 200
    assert 190 <= long["prompt_tokens"] - short["prompt_tokens"] <= 210
