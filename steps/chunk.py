from typing import Annotated

from zenml import step

from materializers.json_models import ChunkSetMaterializer
from ragbench.chunking import ChunkSet, chunk_corpus
from ragbench.grid import CellSpec
from ragbench.knowledge_base import Corpus
from steps.caching import step_cache_policy


@step(cache_policy=step_cache_policy(__name__), output_materializers=ChunkSetMaterializer)
def chunk_knowledge_base(corpus: Corpus, spec: dict, tokenizer: str) -> Annotated[ChunkSet, "chunks"]:
    """One call per (chunk size, overlap); every embedding model's index consumes this same artifact."""
    cell = CellSpec.model_validate(spec)
    return chunk_corpus(
        corpus, chunk_size=cell.chunk_size, chunk_overlap=cell.chunk_overlap, tokenizer_name=tokenizer
    )
