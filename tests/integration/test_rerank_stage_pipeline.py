"""The rerank stage in a real ZenML run: a grid `reranker: [off, <the UNTRAINED stand-in>]` on a small
knowledge base, reader and judge on the loopback fake OpenAI server.

Both cells share one retrieve step, so their first-stage metrics are equal; the stand-in's cell reranks every
case (not only the answered ones) in a step of its own, so its unprefixed metrics measure the reranked ranking
and differ; its reader gets the reranked top_n. A rerun that changes only the reader reuses the rerank step
from ZenML's cache, and the dry run counts the stage's steps. The documents and questions are chosen so that
the stand-in moves an expected source on three of the five cases with expected sources (it ranks as the
packaged MiniLM does on the rest): it is seeded, so the rankings are the same on every machine.
"""

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import run
from ragbench.models.registry import COLBERT_STANDIN_NAME
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import newest_run, printed, write_project

DOCUMENTS = {
    "errors.md": "# Errors\nA failing assert statement raises AssertionError. Dividing by zero raises "
    "ZeroDivisionError. A missing key raises KeyError.",
    "math.md": "# Arithmetic\nDividing a number by zero is undefined in mathematics; Python stops the "
    "program when code divides by nothing.",
    "dicts.md": "# Dictionaries\nLooking up a key that a dictionary does not hold is an error; use get to "
    "avoid it.",
    "numbers.md": "# Numbers\nInteger division with // rounds toward negative infinity.",
    "loops.md": "# Loops\nThe break statement ends the innermost loop at once.",
    "files.md": "# Files\nThe with statement closes a file automatically when the block ends.",
    "strings.md": "# Strings\nThe join method of a string glues a list of strings together.",
    "imports.md": "# Imports\nThe import statement loads a module and binds its name.",
}
# First stage (MiniLM) -> stand-in: floor 3 -> 1, integer 3 -> 1, lookup 2 -> 3, keyerror and negative 1 -> 1.
CASES = [
    {
        "id": "floor",
        "question": "Which exception does floor division by zero raise?",
        "expected_sources": ["errors.md"],
    },
    {
        "id": "integer",
        "question": "What error comes from integer division by zero with //?",
        "expected_sources": ["errors.md"],
    },
    {
        "id": "lookup",
        "question": "What goes wrong when a dictionary lookup misses and get is not used?",
        "expected_sources": ["errors.md"],
    },
    {
        "id": "keyerror",
        "question": "How do I avoid a KeyError when reading a dictionary?",
        "expected_sources": ["dicts.md"],
    },
    {
        "id": "negative",
        "question": "What does // do with negative numbers?",
        "expected_sources": ["numbers.md"],
    },
    {
        "id": "swallow",
        "question": "What is the airspeed of a swallow?",
    },  # no expected source: reranked, unmeasured
]
WITH_SOURCES = 5


def responder(request: dict) -> str:
    if not request.get("response_format"):  # a reader
        return f"{request['model']}: {last_user_text(request).rsplit('Question:', 1)[-1].strip()} [1]."
    return json.dumps({"reasoning": "matches", "score": 5})


@dataclass
class Project:
    root: Path
    server: FakeOpenAIServer
    first: object  # the first run (a ZenML pipeline run response)
    printed: str  # what the first run printed
    dry_before: str  # the dry run before any run
    dry_after: str  # the same dry run after the first run


def successful_output(*arguments: str) -> str:
    """What a run printed to stdout, after checking it succeeded: every run in this file is meant to."""
    code, out, err = printed(*arguments)
    assert code == 0, out + err
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    root = tmp_path_factory.mktemp("rerank-stage") / "project"
    root.mkdir()
    with pytest.MonkeyPatch.context() as patch, FakeOpenAIServer(responder=responder) as server:
        patch.chdir(root)
        patch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
        base = server.base_url
        write_project(
            root,
            DOCUMENTS,
            CASES,
            "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 5, "
            f"top_n: 1, reranker: [off, {COLBERT_STANDIN_NAME}], "
            f"reader: [{{model: openai/reader-a, api_base: {base}}}], "
            f"judge: [{{model: openai/fake-judge, api_base: {base}}}]}}\n"
            "retrieval: {metrics_k: 1}\n"
            # seed 1 answers floor, which reranking moves from rank 3 to 1, and lookup
            "generation: {sample_size: 2, seed: 1, reader: {max_retries: 0}}\n"
            "evaluation: {judge: {max_retries: 0}, rubrics: [correctness], judge_check: null}\n"
            "regression: {baseline: none}\n"
            "llm_cache_dir: llm-cache\n",
        )
        dry_before = successful_output("--dry-run")
        output = successful_output()
        first = newest_run()
        yield Project(root, server, first, output, dry_before, successful_output("--dry-run"))


def rows(project: Project) -> dict[str, dict[str, str]]:
    with (project.root / "out" / "latest" / "results.csv").open() as file:
        return {row["reranker"]: row for row in csv.DictReader(file)}


def step_output(pipeline_run, prefix: str, output: str):
    (name,) = [name for name in pipeline_run.steps if name.startswith(prefix)]
    return pipeline_run.steps[name].outputs[output][0].load()


def test_both_cells_share_the_first_stage_and_the_reranked_one_reports_its_own_ranking(project):
    by_reranker = rows(project)
    assert set(by_reranker) == {"off", "colbert-standin (UNTRAINED)"}
    off, on = by_reranker["off"], by_reranker["colbert-standin (UNTRAINED)"]
    stages = ("mrr", "hit_rate@1", "recall@1", "ndcg@10", "hit_rate@top_n")
    for column in stages:  # one retrieve step: equal first stages, and off reads it unchanged
        assert off[f"first_stage_{column}"] == on[f"first_stage_{column}"] == off[column], column
        assert on[f"first_stage_{column}_low"] and on[f"{column}_low"]  # every one with its interval
    # floor and integer move from rank 3 to 1, lookup from 2 to 3: (1 + 1 + 1/3 + 1 + 1) / 5
    assert float(on["mrr"]) == pytest.approx(0.8667) and float(off["mrr"]) == pytest.approx(0.6333)
    assert float(on["hit_rate@top_n"]) == pytest.approx(0.8) and float(off["hit_rate@top_n"]) == 0.4
    assert on["ndcg@10"] != off["ndcg@10"]
    # every case with expected sources, not the two answered ones
    assert on["retrieval_cases"] == off["retrieval_cases"] == str(WITH_SOURCES)
    assert on["e2e_cases"] == off["e2e_cases"] == "2"
    assert float(on["rerank_ms_per_query"]) > 0 and not off["rerank_ms_per_query"]
    result = step_output(project.first, "rerank_", "rerank_result")
    assert result.cases == len(CASES) and result.reranker.is_standin
    assert result.retrieval.metrics.cases_used == WITH_SOURCES


def test_the_run_says_what_reranking_changed_in_its_summary_report_and_metadata(project):
    assert "What reranking changed" in project.printed
    assert "MRR 0.633 -> 0.867 (+0.233 [" in project.printed
    metadata = project.first.run_metadata
    cells = metadata["cell_ids"]
    assert [metadata[f"first_stage_mrr__{cell}"] for cell in cells] == [pytest.approx(0.6333)] * 2
    assert sorted(metadata[f"mrr__{cell}"] for cell in cells) == [
        pytest.approx(0.6333),
        pytest.approx(0.8667),
    ]
    assert all(f"first_stage_hit_rate_at_top_n_low__{cell}" in metadata for cell in cells)
    gains = {gain["column"]: gain for gain in metadata["rerank_gains"]}
    assert gains["mrr"]["cases"] == WITH_SOURCES and gains["mrr"]["difference"] == pytest.approx(0.2333)
    html = (project.root / "out" / "latest" / "results.html").read_text()
    assert "What reranking changed" in html and "first_stage_ndcg@10" in html
    assert 'aria-label="Reranked minus first stage, per reranking cell"' in html  # the gains' chart
    # the best-cell verdict on MRR compares the reranked ranking with the first stage on the same cases
    table = step_output(project.first, "build_results_table", "results")
    (verdict,) = [v for v in table.verdicts if v.column == "mrr"]
    assert verdict.best == next(cell for cell in cells if "standin" in cell)
    assert {c.n for c in verdict.comparisons} == {WITH_SOURCES}


def test_the_reader_gets_the_reranked_top_n_and_the_off_cell_the_first_stage_top_n(project):
    reranked = step_output(project.first, "rerank_", "candidates")
    first = step_output(project.first, "retrieve_", "candidates")
    assert set(reranked.by_case) == set(first.by_case) == {case["id"] for case in CASES}  # every case
    records = [json.loads(line) for line in (project.root / "out" / "latest" / "cases.jsonl").open()]
    assert len(records) == 4  # two cells, two sampled cases
    answered = {record["case_id"] for record in records}
    moved = [
        case for case in answered if first.by_case[case][0].position != reranked.by_case[case][0].position
    ]
    assert moved, answered  # a case whose reader's passage reranking changed, so the two paths differ
    for record in records:
        ranking = first if record["reranker"] == "off" else reranked
        expected = ranking.by_case[record["case_id"]][:1]
        assert [c["position"] for c in record["contexts"]] == [c.position for c in expected]
        assert [c["score"] for c in record["contexts"]] == [pytest.approx(c.score) for c in expected]


def test_the_dry_run_counts_the_rerank_stage_new_then_reused(project):
    assert (
        "Rerank stage: 1 step(s), 1 new, each reranking the top_k candidates of all 6 cases"
        in project.dry_before
    )
    assert "1 set(s) of ColBERT chunk encodings, 1 new" in project.dry_before
    assert "Rerank stage: 1 step(s), 0 new" in project.dry_after
    assert "1 set(s) of ColBERT chunk encodings, 0 new" in project.dry_after
    assert "2 cells: 0 new, 2 reused" in project.dry_after


def test_a_rerun_that_changes_only_the_reader_reranks_nothing_again(project):
    before = project.server.request_count
    reader = f"grid.reader=[{{model: openai/reader-b, api_base: {project.server.base_url}}}]"
    dry = successful_output("--dry-run", f"--set={reader}")
    assert "Rerank stage: 1 step(s), 0 new" in dry and "2 cells: 2 new" in dry
    assert run.main(["--config", "config.yaml", f"--set={reader}"]) == 0
    second = newest_run()
    statuses = {name: step.status.value for name, step in second.steps.items()}
    for prefix in ("chunk_", "index_", "retrieve_", "colbert_", "rerank_"):
        matching = [status for name, status in statuses.items() if name.startswith(prefix)]
        assert matching and set(matching) == {"cached"}, (prefix, statuses)
    answers = [status for name, status in statuses.items() if name.startswith("answer_")]
    assert len(answers) == 2 and set(answers) == {"completed"}
    assert project.server.request_count > before  # the new reader answered
    reranked_rows = rows(project)  # the same rankings, measured the same
    assert float(reranked_rows["colbert-standin (UNTRAINED)"]["mrr"]) == pytest.approx(0.8667)


def test_a_retrieval_only_grid_sweeps_its_rerankers_and_reuses_the_rerank_step(project):
    """No reader, no LLM call: the reranker's effect on retrieval is a grid of its own (the rerank step
    the answered runs made is the same key, so it comes from the cache)."""
    before = project.server.request_count
    retrieval_only = ("--set=grid.reader=[]", "--set=grid.judge=[]")
    dry = successful_output("--dry-run", *retrieval_only)
    assert "Rerank stage: 1 step(s), 0 new" in dry
    output = successful_output(*retrieval_only)
    assert "What reranking changed" in output and "MRR 0.633 -> 0.867 (+0.233 [" in output
    statuses = {name: step.status.value for name, step in newest_run().steps.items()}
    assert not [name for name in statuses if name.startswith(("answer_", "judge_"))]
    assert [status for name, status in statuses.items() if name.startswith("rerank_")] == ["cached"]
    by_reranker = rows(project)
    assert set(by_reranker) == {"off", "colbert-standin (UNTRAINED)"}
    on, off = by_reranker["colbert-standin (UNTRAINED)"], by_reranker["off"]
    assert float(on["mrr"]) == pytest.approx(0.8667) and float(on["first_stage_mrr"]) == pytest.approx(0.6333)
    assert off["mrr"] == off["first_stage_mrr"] and not off["rerank_ms_per_query"]
    assert "hit_rate@top_n" not in on or not on["hit_rate@top_n"]  # no reader: no top_n it reads
    assert project.server.request_count == before
