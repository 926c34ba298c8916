from pipelines.benchmark import rag_benchmark, rag_race
from pipelines.testset import rag_testset

__all__ = ["rag_benchmark", "rag_race", "rag_testset"]
