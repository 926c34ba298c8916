"""One row per grid cell: what the table, the CSV and the run metadata all show."""

from __future__ import annotations

from pydantic import BaseModel

from ragbench.index import IndexManifest
from ragbench.retrieval import RetrievalReport


def cell_id(chunk_size: int, embedding_model: str) -> str:
    """Readable and usable as a ZenML step-id suffix."""
    short_name = embedding_model.rstrip("/").split("/")[-1]
    safe = "".join(character if character.isalnum() else "_" for character in short_name)
    return f"cs{chunk_size}_{safe}"


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
