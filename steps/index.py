from typing import Annotated

from zenml import log_metadata, step

from materializers.vector_index import VectorIndexMaterializer
from ragbench.chunking import ChunkSet
from ragbench.index import VectorIndex, build_index, load_embedder
from steps.caching import step_cache_policy


@step(cache_policy=step_cache_policy(__name__), output_materializers=VectorIndexMaterializer)
def build_vector_index(chunks: ChunkSet, embedding_model: str) -> Annotated[VectorIndex, "vector_index"]:
    """Built once per (chunk size, overlap, embedding model) and shared by every later setting."""
    index = build_index(chunks, load_embedder(embedding_model))
    log_metadata(index.manifest.model_dump())
    return index
