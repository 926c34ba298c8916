"""Index types and retrievers as grid axes, in a real ZenML run on the default knowledge base (the Python
language reference topics and its 63 eval cases), with a loopback fake LLM as reader and judge."""

import csv
import json

import yaml

import run
from ragbench.config.model import DEFAULT_CONFIG_PATH
from tests.fake_openai_server import FakeOpenAIServer


def responder(request: dict) -> str:
    if request.get("response_format"):
        return json.dumps({"reasoning": "fine", "score": 4})
    return "An answer [1]."


def test_flat_and_hnsw_with_dense_bm25_and_hybrid_run_end_to_end(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder) as server:
        llm = {"api_base": server.base_url, "max_retries": 0}
        config = {
            "name": f"retriever-axes-{tmp_path.name}",
            "knowledge_base": {"kind": "pydoc_topics"},
            "eval_cases": str(DEFAULT_CONFIG_PATH.parent / "eval_cases" / "python_reference.yaml"),
            "grid": {
                "chunk_size": [256],
                "retriever": ["dense", "bm25", "hybrid"],
                "embedding_model": ["sentence-transformers/all-MiniLM-L6-v2"],
                "index": ["flat", "hnsw"],
                "top_k": [10],
                "top_n": [2],
                "reader": ["openai/fake-reader"],
                "judge": ["openai/fake-judge"],
            },
            "generation": {"sample_size": 2, "reader": llm},
            "evaluation": {"judge": llm, "rubrics": ["correctness"], "keyword_tests": False},
            "llm_cache_dir": str(tmp_path / "llm-cache"),
            "output_dir": str(tmp_path / "out"),
        }
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        assert run.main(["--config", "config.yaml"]) == 0

    rows = list(csv.DictReader((tmp_path / "out" / "latest" / "results.csv").open()))
    by_key = {(row["retriever"], row["index"]): row for row in rows}
    assert set(by_key) == {("bm25", ""), *((r, i) for r in ("dense", "hybrid") for i in ("flat", "hnsw"))}
    assert by_key[("bm25", "")]["embedding_model"] == ""
    for (_, index), row in by_key.items():
        assert row["retrieval_cases"] == "63" and row["answers_produced"] == "2"
        assert 0.0 <= float(row["hit_rate@5"]) <= 1.0 and float(row["search_ms_per_query"]) > 0
        if index == "hnsw":  # measured against the exact search of the same vectors and queries
            assert 0.9 <= float(row["recall_vs_exact"]) <= 1.0
            assert float(row["exact_search_ms_per_query"]) > 0
        else:
            assert row["recall_vs_exact"] == ""
    # the three retrievers really differ: BM25 ranks by terms, not by the embedding
    assert by_key[("bm25", "")]["mrr"] != by_key[("dense", "flat")]["mrr"]
    html = (tmp_path / "out" / "latest" / "results.html").read_text()
    assert "Approximate indexes: speed against recall" in html and "recall_vs_exact" in html

    from zenml.client import Client

    run_steps = Client().list_pipeline_runs(sort_by="desc:created", size=1).items[0].steps
    index_steps = sorted(name for name in run_steps if name.startswith("index_"))
    assert len(index_steps) == 2  # one exact, one HNSW from its vectors; shared by dense and hybrid
    assert len([name for name in run_steps if name.startswith("bm25_")]) == 1
    assert len([name for name in run_steps if name.startswith("retrieve_")]) == 5
