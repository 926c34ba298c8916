from typing import Annotated

from zenml import log_metadata

from materializers.colbert_encodings import ColbertEncodingsMaterializer
from ragbench.inputs.chunking import ChunkSet
from ragbench.retrieval.colbert_maxsim import ColbertEncodings, encode_chunk_set
from ragbench.retrieval.rerank import RerankerChoice
from steps.caching import cached_step


@cached_step(output_materializers=ColbertEncodingsMaterializer)
def encode_chunks_for_reranking(
    chunks: ChunkSet, reranker: RerankerChoice
) -> Annotated[ColbertEncodings, "colbert_encodings"]:
    """Every chunk encoded once per (ColBERT checkpoint, chunk set), so reranking encodes only the questions,
    for every top_k, top_n, reader and prompt that reranks these chunks."""
    encodings = encode_chunk_set(reranker, chunks)
    log_metadata(encodings.summary())
    return encodings
