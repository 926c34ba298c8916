"""A scorer shipped by a package of its own: ragbench finds it through the ``ragbench.scorers`` entry point
(see ../ragbench_example_scorer-0.1.dist-info/entry_points.txt), with no edit to ragbench."""

from typing import Literal

from pydantic import BaseModel

from ragbench.llm.prompts import data_section
from ragbench.scoring.metrics import MetricInfo
from ragbench.scoring.rubrics import JudgeInput
from ragbench.scoring.scorer import CaseScore, ScoreContext, Scorer


class NamesADocumentVerdict(BaseModel):
    reason: str
    verdict: Literal[0, 1]


class NamesADocument(Scorer):
    name = "names_a_document"
    needs = ("question", "answer")
    definition = "1 when the judge finds that the answer names the document it relied on, else 0."

    def metrics(self) -> tuple[MetricInfo, ...]:
        return (MetricInfo(column=self.name, label="names a document (share)", higher_is_better=True),)

    def score(self, case: JudgeInput, context: ScoreContext) -> CaseScore:
        reply = context.ask(
            [
                {"role": "system", "content": "Say whether the answer names a document by its file name."},
                {"role": "user", "content": data_section("answer", case.answer)},
            ],
            NamesADocumentVerdict,
        )
        return CaseScore(values={self.name: float(reply["verdict"])}, details={"reason": reply["reason"]})
