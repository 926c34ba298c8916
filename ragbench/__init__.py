"""Framework-free core of the RAG benchmark: everything here is importable and testable without ZenML."""
