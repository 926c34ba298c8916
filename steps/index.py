from typing import Annotated

from zenml import log_metadata
from zenml.client import Client

from materializers.vector_index import VectorIndexMaterializer
from ragbench.inputs.chunking import ChunkSet
from ragbench.retrieval.index import VectorIndex, build_approximate_index, build_index, load_embedder
from steps.caching import OPERATIONS, Operations, cached_step


@cached_step(
    ignored_inputs=(OPERATIONS,),
    output_materializers=VectorIndexMaterializer,
)
def build_vector_index(
    chunks: ChunkSet, operations: Operations, embedding_model: str
) -> Annotated[VectorIndex, "vector_index"]:
    """The exact index, once per (chunk size, overlap, embedding model): every approximate index and setting
    after it reads its vectors. Finished shards are checkpointed in the artifact store (every pod of the stack
    sees it) until the index is done. The shard size and the device come with the `operations` (outside the
    cache key): they change how the vectors are made, never the vectors."""
    checkpoints = f"{Client().active_stack.artifact_store.path.rstrip('/')}/ragbench-embedding-checkpoints"
    index = build_index(
        chunks,
        load_embedder(embedding_model, operations.device),
        shard_size=operations.shard_size,
        checkpoint_location=checkpoints,
    )
    log_metadata(index.manifest.model_dump())
    return index


@cached_step(output_materializers=VectorIndexMaterializer)
def build_approximate_vector_index(
    exact: VectorIndex, index_type: str
) -> Annotated[VectorIndex, "vector_index"]:
    """One approximate index (HNSW, IVF, ...) per type, from the exact index's vectors: nothing is embedded
    again."""
    index = build_approximate_index(exact, index_type)
    log_metadata(index.manifest.model_dump())
    return index
