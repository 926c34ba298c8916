"""ZenML materializers for the benchmark's artifact types (one file each, no list-of-objects artifacts)."""

from materializers.json_models import ChunkSetMaterializer, CorpusMaterializer
from materializers.results_table import ResultsTableMaterializer
from materializers.vector_index import VectorIndexMaterializer

__all__ = [
    "ChunkSetMaterializer",
    "CorpusMaterializer",
    "ResultsTableMaterializer",
    "VectorIndexMaterializer",
]
