from typing import Annotated

from zenml import log_metadata

from materializers.lexical_index import LexicalIndexMaterializer
from ragbench.inputs.chunking import ChunkSet
from ragbench.retrieval.lexical import LexicalIndex, build_lexical_index
from steps.caching import cached_step


@cached_step(output_materializers=LexicalIndexMaterializer)
def build_bm25_index(chunks: ChunkSet) -> Annotated[LexicalIndex, "bm25_index"]:
    """Built once per chunk set (it depends on no embedding model) and shared by every bm25 and hybrid
    setting of that chunk size."""
    index = build_lexical_index(chunks)
    log_metadata(index.manifest.model_dump())
    return index
