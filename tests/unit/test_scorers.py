"""Scorers over a cell's answers (`ragbench.scoring.apply`): a case missing a field a scorer needs is
skipped with the reason, a failed call is an error and never a value, and the summary and the per-case
values read only what was scored; a scorer's integer verdicts are kept as scores and sampled again for
self-consistency."""

from types import SimpleNamespace

from pydantic import BaseModel

from ragbench.llm.types import LLMResult
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


class _Reply(BaseModel):
    verdict: int


class CountingClient:
    """Stands in for `LLMClient`: replies with the sample number asked for, and records each."""

    def __init__(self) -> None:
        self.settings = SimpleNamespace(temperature=0.7)
        self.effective_concurrency = 1
        self.samples: list[int] = []

    def complete(self, messages, *, response_schema, sample=0):
        self.samples.append(sample)
        return LLMResult(model="fake", parsed={"verdict": sample}, prompt_tokens=1)


class Verdicts(Scorer):
    """Any scorer may give integer verdicts: they are kept as scores and sampled again."""

    name = "verdicts"
    gives_verdicts = True

    def metrics(self):
        return (MetricInfo(column="verdict_value", label="verdict", higher_is_better=True),)

    def score(self, case, context):
        sample = context.ask([{"role": "user", "content": case.question}], _Reply)["verdict"]
        return CaseScore(
            values={"verdict_value": 1.0}, verdicts={"verdict": sample}, reasoning=f"sample {sample}"
        )


class Twice(Scorer):
    """Gives no verdicts and names the samples of its own calls (as answer_relevancy does)."""

    name = "twice"

    def metrics(self):
        return (MetricInfo(column="twice", label="twice", higher_is_better=True),)

    def score(self, case, context):
        replies = [
            context.ask([{"role": "user", "content": case.question}], _Reply, sample=s) for s in (0, 1)
        ]
        return CaseScore(values={"twice": float(sum(r["verdict"] for r in replies))})


def test_any_scorers_verdicts_are_kept_and_only_verdicts_are_sampled_again():
    client = CountingClient()
    [judgement] = judgements = [Judgement(case_id="a")]
    inputs = [JudgeInput(case_id="a", question="q", answer="x")]
    apply_scorers(client, None, inputs, [Verdicts(), Twice()], judgements, samples=3)
    assert judgement.scores == {"verdict": 0} and judgement.reasoning == {"verdicts": "sample 0"}
    assert judgement.resampled == {"verdict": [1, 2]} and judgement.resample_failures == 0
    assert judgement.values == {"verdict_value": 1.0, "twice": 1.0}
    # the verdict scorer asked for samples 0, 1, 2; the other scorer once, with the samples it named
    assert client.samples == [0, 0, 1, 1, 2] and judgement.prompt_tokens == 5
