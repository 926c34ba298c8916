from typing import Annotated

from zenml import log_metadata, step

import ragbench.index
from materializers import VectorIndexMaterializer
from ragbench.chunking import ChunkSet
from ragbench.index import VectorIndex, build_index, load_embedder
from steps.caching import cache_on


@step(cache_policy=cache_on(ragbench.index), output_materializers=VectorIndexMaterializer)
def build_vector_index(chunks: ChunkSet, embedding_model: str) -> Annotated[VectorIndex, "vector_index"]:
    """Built once per (chunk size, embedding model) and shared by every later setting."""
    index = build_index(chunks, load_embedder(embedding_model))
    log_metadata(index.manifest.model_dump())
    return index
