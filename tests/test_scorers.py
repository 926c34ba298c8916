"""Scorers over a cell's answers (`ragbench.scoring.apply`): a case missing a field a scorer needs is
skipped with the reason, a failed call is an error and never a value, and the summary and the per-case
values read only what was scored."""

from ragbench.scoring.apply import apply_scorers
from ragbench.scoring.judge import Judgement, judge_case_values, summarise_judgements
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.rubrics import JudgeInput
from ragbench.scoring.scorer import CaseScore, Scorer, ScorerCallFailed


class AnswerLength(Scorer):
    name = "answer_length"
    needs = ("answer", "reference_answer")
    uses_llm = False

    def metrics(self):
        return (MetricInfo(column="answer_length", label="length", higher_is_better=False),)

    def score(self, case, context):
        if "boom" in case.answer:
            raise ScorerCallFailed("the judge gave no valid reply")
        return CaseScore(
            values={"answer_length": float(len(case.answer))}, details={"words": case.answer.split()}
        )


def test_skipped_failed_and_scored_cases_are_kept_apart():
    inputs = [
        JudgeInput(case_id="a", question="q", answer="four", reference_answer="4"),
        JudgeInput(case_id="b", question="q", answer="no reference"),
        JudgeInput(case_id="c", question="q", answer="boom", reference_answer="x"),
    ]
    judgements = [Judgement(case_id=item.case_id) for item in inputs]
    apply_scorers(None, None, inputs, [AnswerLength()], judgements)
    scored, skipped, failed = judgements
    assert scored.values == {"answer_length": 4.0} and scored.details["answer_length"] == {"words": ["four"]}
    assert skipped.skipped == {"answer_length": "no reference answer"} and not skipped.values
    assert failed.errors == {"answer_length": "the judge gave no valid reply"} and not failed.values
    columns = {"answer_length": ["answer_length"]}
    assert judge_case_values(judgements, [], columns) == {"answer_length": {"a": 4.0}}
    summary = summarise_judgements(judgements, [], columns)
    assert summary.means == {"answer_length": 4.0} and summary.scored == {"answer_length": 1}
    assert summary.failures == {"answer_length": 1}
