from typing import Annotated

from zenml import step

import ragbench.chunking
from materializers import ChunkSetMaterializer
from ragbench.chunking import ChunkSet, chunk_corpus
from ragbench.knowledge_base import Corpus
from steps.caching import cache_on


@step(cache_policy=cache_on(ragbench.chunking), output_materializers=ChunkSetMaterializer)
def chunk_knowledge_base(
    corpus: Corpus, chunk_size: int, chunk_overlap: int, tokenizer: str
) -> Annotated[ChunkSet, "chunks"]:
    """One call per chunk size; every embedding model's index consumes this same artifact."""
    return chunk_corpus(corpus, chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer_name=tokenizer)
