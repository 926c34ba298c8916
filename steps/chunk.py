from typing import Annotated

from materializers.json_models import ChunkSetMaterializer
from ragbench.inputs.chunking import ChunkSet, chunk_corpus
from ragbench.inputs.knowledge_base import Corpus
from steps.caching import cached_step


@cached_step(output_materializers=ChunkSetMaterializer)
def chunk_knowledge_base(
    corpus: Corpus, chunk_size: int, chunk_overlap: int, tokenizer: str
) -> Annotated[ChunkSet, "chunks"]:
    """One call per (chunk size, overlap in tokens); every embedding model's index consumes this artifact.
    Plain parameters, not a cell: the grid and config modules would add LLM code to its cache key."""
    return chunk_corpus(corpus, chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer_name=tokenizer)
