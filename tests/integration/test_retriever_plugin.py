"""A retriever another package ships (here a toy defined in this module, registered through the
``ragbench.retrievers`` entry point group as `pip install` would register it) is a grid value like a
built-in: retrieved in a real ZenML run, served from ZenML's cache the second time, in the results table and
the report, with no edit to ragbench; a name nobody registers is refused before any work."""

import csv
import re
from pathlib import Path

import pytest

import run
from ragbench.config.expand import expand_grid
from ragbench.config.model import ConfigError, load_config
from ragbench.retrieval.retrievers import (
    RETRIEVER_ENTRY_POINTS,
    Ranking,
    Retriever,
    SearchContext,
    lexical_keys,
    row_step_ids,
)
from tests.projects import THREE_TOPIC_CASES as CASES
from tests.projects import THREE_TOPICS as DOCUMENTS
from tests.projects import write_project


class WordOverlap(Retriever):
    """The toy: chunks ranked by how many of the question's words of four letters or more they contain."""

    name = "word_overlap"
    searches = 0  # calls in this process: a cached retrieve step makes none

    def search(self, questions: list[str], top_k: int, context: SearchContext) -> list[Ranking]:
        type(self).searches += 1
        chunk_words = [set(re.findall(r"\w{4,}", text.lower())) for text in context.chunks.texts]
        rankings: list[Ranking] = []
        for question in questions:
            words = set(re.findall(r"\w{4,}", question.lower()))
            overlaps = [len(words & chunk) for chunk in chunk_words]
            best = sorted(range(len(overlaps)), key=lambda position: -overlaps[position])[:top_k]
            rankings.append((best, [float(overlaps[position]) for position in best]))
        return rankings


@pytest.fixture
def toy_registered(tmp_path, monkeypatch):
    """An installed package's metadata naming the toy by its entry point, put on the import path."""
    site = tmp_path / "site"
    metadata = site / "ragbench_toy_retriever-0.1.dist-info"
    metadata.mkdir(parents=True)
    (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: ragbench-toy-retriever\nVersion: 0.1\n")
    (metadata / "entry_points.txt").write_text(
        f"[{RETRIEVER_ENTRY_POINTS}]\n{WordOverlap.name} = {__name__}:{WordOverlap.__name__}\n"
    )
    monkeypatch.syspath_prepend(str(site))


def write(root: Path) -> None:
    write_project(
        root,
        DOCUMENTS,
        CASES,
        "retrieval: {metrics_k: 1}\n"
        f"grid: {{chunk_size: [64], retriever: [bm25, {WordOverlap.name}], top_k: 3, "
        "reader: [], judge: []}\n",
    )


def test_a_registered_retriever_is_a_grid_value_that_reads_no_index(tmp_path, toy_registered):
    write(tmp_path)
    cells = expand_grid(load_config(tmp_path / "config.yaml"))
    toy = next(cell for cell in cells if cell.retriever == WordOverlap.name)
    assert toy.embedding_model is None and toy.index is None  # it reads no dense index
    assert row_step_ids(toy) == [toy.step_id("retrieve")]  # nor the BM25 one
    assert len(lexical_keys(cells)) == 1  # the bm25 cell's


def test_an_unregistered_retriever_is_refused_with_the_names_there_are(tmp_path):
    write(tmp_path)
    with pytest.raises(ConfigError, match=f"grid.retriever.*unknown retriever.*{WordOverlap.name}.*hybrid"):
        load_config(tmp_path / "config.yaml")


def test_a_registered_retriever_is_retrieved_cached_and_reported(tmp_path, monkeypatch, toy_registered):
    monkeypatch.chdir(tmp_path)
    write(tmp_path)
    searches = WordOverlap.searches
    assert run.main(["--config", "config.yaml"]) == 0
    assert WordOverlap.searches == searches + 1
    with (tmp_path / "out" / "latest" / "results.csv").open() as file:
        rows = {row["retriever"]: row for row in csv.DictReader(file)}
    assert set(rows) == {"bm25", WordOverlap.name}
    toy = rows[WordOverlap.name]
    # every question shares its longer words with its own page only
    assert toy["retrieval_cases"] == "3" and float(toy["hit_rate@1"]) == 1.0 and float(toy["mrr"]) == 1.0
    assert toy["embedding_model"] == "" and toy["index_mb"] == "0.0"
    assert WordOverlap.name in (tmp_path / "out" / "latest" / "results.html").read_text()

    assert run.main(["--config", "config.yaml"]) == 0
    assert WordOverlap.searches == searches + 1  # the second run searched nothing
    from zenml.client import Client

    steps = Client().list_pipeline_runs(sort_by="desc:created", size=1).items[0].steps
    (toy_step,) = [name for name in steps if name.startswith("retrieve_") and WordOverlap.name in name]
    assert steps[toy_step].status.value == "cached"
