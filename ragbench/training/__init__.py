"""A reranker trained on the knowledge base itself (`run.py train-reranker`): questions written per chunk
by the eval-set generator's prompt, kept when retrieval finds their chunk again, hard negatives mined by BM25
and the dense index, then a late-interaction (ColBERT) model fine-tuned from the shipped MiniLM weights on
the CPU, with a validation split and early stopping.

- `settings`: the `reranker_training` config section;
- `questions`: the per-chunk question requests, and the eval cases held out of training;
- `pairs`: the retrieval roundtrip filter, hard negatives and the train/validation split;
- `colbert`: the training loop and the checkpoint it writes (colbertv2.0 layout).

May import: ragbench.inputs, ragbench.llm, ragbench.models, ragbench.retrieval, ragbench.testset.
"""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
