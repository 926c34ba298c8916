from pipelines.benchmark import rag_benchmark

__all__ = ["rag_benchmark"]
