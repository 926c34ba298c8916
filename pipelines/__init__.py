from pipelines.benchmark import rag_benchmark
from pipelines.testset import rag_testset

__all__ = ["rag_benchmark", "rag_testset"]
