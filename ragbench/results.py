"""One row per grid cell: what the table, the CSV and the run metadata all show."""

from __future__ import annotations

from pydantic import BaseModel

from ragbench.generation import AnswerEvaluation, AnswerSet, generation_columns
from ragbench.index import IndexManifest
from ragbench.retrieval import RetrievalReport


def cell_id(chunk_size: int, embedding_model: str) -> str:
    """Readable and usable as a ZenML step-id suffix."""
    short_name = embedding_model.rstrip("/").split("/")[-1]
    safe = "".join(character if character.isalnum() else "_" for character in short_name)
    return f"cs{chunk_size}_{safe}"


def full_cell_id(chunk_size: int, embedding_model: str, rerank: bool, reader: str) -> str:
    reader_name = "".join(character if character.isalnum() else "_" for character in reader.split("/")[-1])
    return f"{cell_id(chunk_size, embedding_model)}_rerank{'On' if rerank else 'Off'}_{reader_name}"


class CellResult(BaseModel):
    cell_id: str
    index: IndexManifest
    retrieval: RetrievalReport

    def row(self) -> dict:
        metrics = self.retrieval.metrics
        k = metrics.metrics_k
        return {
            "cell": self.cell_id,
            "chunk_size": self.index.chunk_size,
            "embedding": self.index.embedding_model,
            "chunks": self.index.chunk_count,
            "chunks_truncated": self.index.chunks_over_max_length,
            "retrieval_cases": metrics.cases_used,
            f"failure_rate@{k}": metrics.failure_rate,
            f"hit_rate@{k}": metrics.hit_rate,
            f"recall@{k}": metrics.recall,
            "mrr": metrics.mrr,
            "ndcg@10": metrics.ndcg_at_10,
            "index_build_s": self.index.build_seconds,
            "chunks_per_s": self.index.chunks_per_second,
        }


def results_rows(
    retrieval: list[CellResult], answer_sets: list[AnswerSet], evaluations: list[AnswerEvaluation]
) -> list[dict]:
    """One row per grid cell: its (chunk size, embedding) retrieval metrics plus its end-to-end scores."""
    if not answer_sets:
        return [result.row() for result in retrieval]
    by_pair = {(result.index.chunk_size, result.index.embedding_model): result for result in retrieval}
    rows = []
    for answers, evaluation in zip(answer_sets, evaluations, strict=True):
        row = by_pair[(answers.chunk_size, answers.embedding_model)].row()
        row["cell"] = answers.cell_id
        rows.append(row | generation_columns(answers, evaluation))
    return rows


# Answers the judge scored at or below this correctness (1-5) are listed in the report.
WEAK_CORRECTNESS = 2


def keyword_failure_rows(evaluations: list[AnswerEvaluation]) -> list[dict]:
    """Every failed keyword check with the word that decided it and the answer, for the report."""
    return [
        {"cell": e.cell_id, "case": f.case_id, "suite": f.suite, "word": f.word, "answer": f.answer}
        for e in evaluations
        if e.keyword is not None
        for f in e.keyword.failing
    ]


def weak_answer_rows(answer_sets: list[AnswerSet], evaluations: list[AnswerEvaluation]) -> list[dict]:
    """Answers the judge scored correctness <= WEAK_CORRECTNESS or could not score, with its reasoning."""
    rows = []
    for answers, evaluation in zip(answer_sets, evaluations, strict=True):
        text = {answer.case_id: answer.answer for answer in answers.answers}
        for j in evaluation.judgements:
            weak = j.correctness is not None and j.correctness <= WEAK_CORRECTNESS
            if weak or j.correctness_error or j.context_error:
                rows.append(
                    {
                        "cell": answers.cell_id,
                        "case": j.case_id,
                        "correctness_1to5": j.correctness,
                        "judge_reasoning": j.correctness_reasoning or j.correctness_error or j.context_error,
                        "answer": text.get(j.case_id),
                    }
                )
    return rows
