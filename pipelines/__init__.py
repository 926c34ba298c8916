from pipelines.benchmark import rag_benchmark, rag_race
from pipelines.testset import rag_testset
from pipelines.train_reranker import rag_train_reranker

__all__ = ["rag_benchmark", "rag_race", "rag_testset", "rag_train_reranker"]
