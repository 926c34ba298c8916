"""A scorer shipped by an installed package that depends on ragbench (../pyproject.toml registers it under
the `ragbench.scorers` entry point): no LLM call, so a run that names it costs only the reader's answers."""

from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.rubrics import JudgeInput
from ragbench.scoring.scorer import CaseScore, ScoreContext, Scorer


class AnswerWords(Scorer):
    name = "answer_words"
    needs = ("answer",)
    uses_llm = False
    definition = "The number of words in the answer."

    def metrics(self) -> tuple[MetricInfo, ...]:
        return (MetricInfo(column=self.name, label="answer words", higher_is_better=False),)

    def score(self, case: JudgeInput, context: ScoreContext) -> CaseScore:
        return CaseScore(values={self.name: float(len(case.answer.split()))})
