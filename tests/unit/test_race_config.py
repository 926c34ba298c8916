"""The race in the config and around it: what `search` refuses before anything runs, the example config,
`run.py race`, and how answer sets and verdicts made in rounds join into one per key."""

import pytest

from cli.benchmark import raced
from ragbench.config.expand import expand_grid
from ragbench.config.model import DEFAULT_CONFIG_PATH, ConfigError, load_config
from ragbench.config.preflight import PreflightError, run_preflight
from ragbench.generation.answers import AnswerSet
from ragbench.generation.reader import ReaderAnswer
from ragbench.grid.cell import CellSpec
from ragbench.llm.types import LLMResult
from ragbench.scoring.apply import Judgement
from ragbench.scoring.cells import JudgeResult


def test_the_example_config_races_the_local_readers_and_prompts():
    config = load_config(DEFAULT_CONFIG_PATH.parent / "race_readers.yaml")
    assert config.search is not None and config.search.metric == "answer_similarity"
    assert config.race_metric().higher_is_better is True
    assert len(config.grid.reader) == 2 and config.grid.prompt == ["default", "plain"]


def test_the_default_config_does_not_race():
    assert load_config().search is None


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("search={strategy: race, metric: mrr}", "is a retrieval metric"),
        ("search={strategy: race, metric: nonsense}", "is not computed here"),
        ("search={strategy: race, metric: correctness_0to1, batch: 1}", "greater than or equal to 2"),
        ("search={strategy: bandit, metric: correctness_0to1}", "race"),
    ],
)
def test_a_bad_search_is_refused_before_anything_runs(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[override])


def test_a_race_needs_two_cells_and_readers(tmp_path):
    one_cell = ["grid.chunk_size=[128]", "grid.retriever=[dense]"]
    config = load_config(overrides=[*one_cell, "search={strategy: race, metric: correctness_0to1}"])
    with pytest.raises(PreflightError, match="at least two cells"):  # before any model loads
        run_preflight(config, cells=expand_grid(config), plan_only=True)
    with pytest.raises(ConfigError, match="needs readers"):
        load_config(overrides=["grid.reader=[]", "search={strategy: race, metric: correctness_0to1}"])


def test_run_race_races_on_the_first_end_to_end_headline_metric():
    config = raced(load_config())
    assert config.search is not None and config.search.metric == "correctness_0to1"
    assert raced(config) is config  # a config's own search is kept
    with pytest.raises(ConfigError, match="no end-to-end metric"):
        raced(load_config(overrides=["grid.reader=[]"]))


def answers(spec: CellSpec, cases: list[str], text: str) -> AnswerSet:
    return AnswerSet(
        spec=spec,
        reranker=None,
        answers=[ReaderAnswer(case_id=case, question=case, answer=f"{text} {case}") for case in cases],
    )


def test_rounds_join_in_round_order_and_keep_a_case_once():
    spec = expand_grid(load_config())[0].upto("answer")
    joined = AnswerSet.joined([answers(spec, ["a", "b"], "first"), answers(spec, ["c", "a"], "second")])
    assert [(a.case_id, a.answer) for a in joined.answers] == [
        ("a", "first a"),
        ("b", "first b"),
        ("c", "second c"),
    ]
    other = expand_grid(load_config())[1].upto("answer")
    with pytest.raises(ValueError, match="one grid key"):
        AnswerSet.joined([answers(spec, ["a"], "x"), answers(other, ["b"], "y")])
    judge_key = expand_grid(load_config())[0]
    parts = [
        JudgeResult(spec=judge_key, rubrics=[], judgements=[Judgement(case_id="a", scores={"c": 5})]),
        JudgeResult(spec=judge_key, rubrics=[], judgements=[Judgement(case_id="b", scores={"c": 1})]),
    ]
    assert [(j.case_id, j.scores["c"]) for j in JudgeResult.joined(parts).judgements] == [("a", 5), ("b", 1)]


def test_a_judgement_counts_its_calls_a_cached_one_too():
    judgement = Judgement(case_id="a")
    judgement.add(LLMResult(model="m", prompt_tokens=10))
    judgement.add(LLMResult(model="m", prompt_tokens=5, cached=True))
    assert (judgement.calls, judgement.prompt_tokens) == (2, 15)
