"""`search:` by strategy: what each refuses before any model loads (the config, then the preflight where the
cells and the case count are known), and that a race config loads exactly as before."""

import pytest

from ragbench.analysis.racing import RaceConfig
from ragbench.analysis.staged import race_settings
from ragbench.analysis.strategies import ModelSearch, StagedSearch, first_stage_cells, searched_cases
from ragbench.config.expand import expand_grid
from ragbench.config.model import ConfigError, load_config
from ragbench.config.preflight import PreflightError, run_preflight
from tests.projects import printed, write_project

STAGED = "search={strategy: staged, metric: correctness_0to1}"


def test_a_race_loads_as_before_and_each_strategy_as_its_own_section():
    race = load_config(overrides=["search={strategy: race, metric: correctness_0to1, batch: 4}"]).search
    assert type(race) is RaceConfig and list(RaceConfig.model_fields)[:2] == ["strategy", "metric"]
    assert race.model_dump() == {
        "strategy": "race",
        "metric": "correctness_0to1",
        "batch": 4,
        "max_cases": None,
        "alpha": 0.05,
        "budget_calls": None,
        "margin": None,
    }
    config = load_config(overrides=[STAGED])
    staged = config.search
    assert isinstance(staged, StagedSearch) and (staged.holdout, staged.finalists) == (0.3, 3)
    assert config.stage_metric().column == "hit_rate@5"  # the headline retrieval column at metrics_k
    assert race_settings(staged) == RaceConfig(strategy="race", metric="correctness_0to1")
    tpe = load_config(overrides=["search={strategy: tpe, metric: correctness_0to1, max_cells: 10}"]).search
    assert isinstance(tpe, ModelSearch) and (tpe.startup_trials, tpe.seed) == (8, 0)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("search={strategy: staged, metric: mrr}", "is a retrieval metric"),
        ("search={strategy: staged, metric: nonsense}", "is not computed here"),
        (
            "search={strategy: staged, metric: correctness_0to1, retrieval_metric: correctness_0to1}",
            "not a retrieval metric computed per case",
        ),
        (
            "search={strategy: staged, metric: correctness_0to1, retrieval_metric: hit_rate@10}",
            r"one of \['mrr', 'hit_rate@5'",
        ),
        ("search={strategy: staged, metric: correctness_0to1, holdout: 1}", "less than 1"),
        ("search={strategy: staged, metric: correctness_0to1, finalists: 0}", "greater than or equal to 1"),
        ("search={strategy: tpe, metric: correctness_0to1}", "max_cells"),
        (
            "search={strategy: tpe, metric: correctness_0to1, max_cells: 4}",
            r"max_cells \(4\) is smaller than startup_trials \(8\)",
        ),
        ("search={strategy: grid, metric: correctness_0to1}", "'race', 'staged', 'tpe'"),
    ],
)
def test_a_bad_search_is_refused_by_the_config(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[override])


def test_a_cell_budget_under_one_retrieval_keys_cells_is_refused_by_the_preflight():
    grid = ["grid.reader=[local/qwen2.5-coder-1.5b-instruct, openai/gpt-4o-mini]", "grid.prompt=[default]"]
    config = load_config(overrides=[*grid, STAGED.replace("}", ", max_cells: 1}")])
    cells = expand_grid(config)
    assert len(cells) == 12 and first_stage_cells(cells) == 2  # 6 retrieval keys x 2 readers
    with pytest.raises(PreflightError, match=r"max_cells \(1\) is smaller than .* at least 2"):
        run_preflight(config, cells=cells, plan_only=True)


def test_the_cases_a_search_spends():
    staged = StagedSearch(strategy="staged", metric="m", max_cases=30)
    assert searched_cases(staged, 63, None) == 30
    assert searched_cases(staged.model_copy(update={"max_cases": None}), 63, 20) == 20
    assert searched_cases(staged.model_copy(update={"max_cases": None}), 63, None) == 63


PAGES = {f"{topic}.md": f"# {topic}\n{topic} is a letter." for topic in "abcdefghij"}
CASES = [
    {
        "id": f"case-{t}",
        "question": f"What is {t}?",
        "reference_answer": f"{t}.",
        "expected_sources": [f"{t}.md"],
    }
    for t in "abcdefghij"
]


def test_run_refuses_a_holdout_too_small_for_a_paired_test_before_any_model_loads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")  # the readers' key is checked first
    write_project(
        tmp_path,
        PAGES,
        CASES,
        "grid: {chunk_size: [64], retriever: [bm25], reader: [openai/r1, openai/r2], judge: [openai/j]}\n"
        "search: {strategy: staged, metric: correctness_0to1, holdout: 0.3}\n",
    )
    for arguments in ((), ("--dry-run",)):
        code, _, err = printed(*arguments)
        assert code == 2
        assert (
            "search.holdout 0.3 of 10 case(s) holds out 3: a paired test on the held-out cases needs " in err
        )
        assert "use at least 20 cases at this share" in err


def plan_of(*overrides: str):
    from ragbench.config.search_plan import search_plan
    from ragbench.inputs.eval_cases import load_eval_suite_from

    config = load_config(
        overrides=["grid.prompt=[default, plain]", "prompts={plain: {system: Answer.}}", *overrides]
    )
    return search_plan(config, expand_grid(config), load_eval_suite_from(config.eval_cases).cases)


def test_the_dry_run_bounds_each_strategys_calls_against_the_full_grids():
    # 12 cells (2 chunk sizes x 3 retrievers x 2 prompts), each 2 calls a case (reader, correctness judge)
    staged = plan_of("search={strategy: staged, metric: correctness_0to1, max_cases: 40, max_cells: 4}")
    assert (staged.cells, staged.cells_at_most, staged.cases, staged.held_out) == (12, 4, 40, 12)
    assert staged.full_calls == 12 * 2 * 40
    assert staged.calls_at_most == 4 * 2 * 28 + 3 * 2 * 12  # 4 cells race on 28, 3 finalists on 12
    assert (
        "at most 4 of 12 cells answer, at most 296 reader and judge calls on 40 cases, 28 search and 12 "
        in (staged.line())
    )
    assert "(31%), against 960 for the full grid on the same cases" in staged.line()
    race = plan_of("search={strategy: race, metric: correctness_0to1, max_cases: 40, budget_calls: 500}")
    assert (race.cells_at_most, race.calls_at_most, race.full_calls) == (12, 500, 960)
    tpe = plan_of(
        "search={strategy: tpe, metric: correctness_0to1, max_cells: 8, max_cases: 40, holdout: 0.25, "
        "finalists: 2}"
    )
    assert (tpe.cells_at_most, tpe.cases, tpe.held_out) == (8, 40, 10)
    assert tpe.calls_at_most == 8 * 2 * 30 + 2 * 2 * 10 and tpe.full_calls == 960
    assert plan_of() is None
