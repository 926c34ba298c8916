from typing import Annotated

from zenml import log_metadata, step

import ragbench.eval_cases
import ragbench.knowledge_base
from materializers import CorpusMaterializer
from ragbench.config import KnowledgeBaseConfig
from ragbench.eval_cases import EvalCase, EvalSuite
from ragbench.knowledge_base import Corpus, load_corpus
from steps.caching import cache_on


@step(cache_policy=cache_on(ragbench.knowledge_base), output_materializers=CorpusMaterializer)
def ingest_knowledge_base(knowledge_base: dict, fingerprint: str) -> Annotated[Corpus, "corpus"]:
    """`fingerprint` is a content hash computed by run.py: a changed knowledge base misses the cache."""
    corpus = load_corpus(KnowledgeBaseConfig.model_validate(knowledge_base), fingerprint=fingerprint)
    log_metadata({"documents": len(corpus.documents), "skipped_files": corpus.skipped})
    return corpus


@step(cache_policy=cache_on(ragbench.eval_cases))
def load_eval_suite(cases: list[dict], fingerprint: str) -> Annotated[EvalSuite, "eval_cases"]:
    """Cases travel as a parameter (validated by run.py first), so remote orchestrators need no local file."""
    return EvalSuite(cases=[EvalCase.model_validate(case) for case in cases], fingerprint=fingerprint)
