"""The dry run's estimate holds to the assumption it prints (`ANSWER_ASSUMPTION`), and its plan of what
the run can detect reads the config's latest run."""

from types import SimpleNamespace

import numpy as np

from ragbench.analysis.labelled import CorrectedMetric, LabelCorrection
from ragbench.analysis.uncertainty import compare_cells
from ragbench.config.dry_run import ANSWER_ASSUMPTION, detection_lines, plan_rows
from ragbench.config.expand import expand_grid
from ragbench.config.model import load_config
from ragbench.inputs.eval_cases import EvalCase
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import StatisticsConfig
from tests.projects import write_project

CASES = [{"id": "a", "question": "What is a?", "reference_answer": "A.", "expected_sources": ["a.md"]}]


def estimate(tmp_path, max_tokens: int) -> dict:
    write_project(
        tmp_path,
        {"a.md": "# A\nA is the first letter."},
        CASES,
        "grid: {chunk_size: [64], embedding_model: [m], reader: [openai/r], judge: [openai/j]}\n"
        f"generation: {{reader: {{max_tokens: {max_tokens}}}}}\n"
        "evaluation: {rubrics: [correctness], judge_check: null}\n",
    )
    config = load_config(tmp_path / "config.yaml")
    (row,) = plan_rows(config, [EvalCase.model_validate(c) for c in CASES], set(), cells=expand_grid(config))
    return row


def test_a_judge_reads_answers_as_long_as_the_reader_is_priced_for(tmp_path):
    """One answer judged once: a reader allowed 200 more tokens costs 200 more completion tokens and
    about 200 more judge prompt tokens (one placeholder word is about one token)."""
    assert "max_tokens" in ANSWER_ASSUMPTION and "judges read answers that long" in ANSWER_ASSUMPTION
    short, long = estimate(tmp_path / "short", 100), estimate(tmp_path / "long", 300)
    assert long["completion_tokens_max"] - short["completion_tokens_max"] == 200
    assert 190 <= long["prompt_tokens"] - short["prompt_tokens"] <= 210


CORRECTNESS = "{rubrics: [correctness], judge_check: null}"


def detection_plan(
    tmp_path, grid: str, previous, statistics: str = "", evaluation: str = CORRECTNESS
) -> list[str]:
    cases = [
        {
            "id": f"q{i}",
            "question": f"What is {i}?",
            "reference_answer": f"{i}.",
            "expected_sources": ["a.md"],
        }
        for i in range(40)
    ]
    write_project(
        tmp_path,
        {"a.md": "# A\nA is the first letter."},
        cases,
        f"name: planned\ngrid: {grid}\ngeneration: {{sample_size: 10}}\nevaluation: {evaluation}\n"
        + statistics,
    )
    config = load_config(tmp_path / "config.yaml")
    cases = [EvalCase.model_validate(c) for c in cases]
    return detection_lines(config, cases, previous, cells=expand_grid(config))


TWO_CELLS = "{chunk_size: [64, 128], embedding_model: [m], reader: [openai/r], judge: [openai/j]}"


def previous_run(seed: int = 0) -> tuple[str, SimpleNamespace]:
    """A results table of the config's latest run: two cells' MRR on 40 cases and correctness on 10."""
    rng = np.random.default_rng(seed)
    metrics = [
        MetricInfo(column="mrr", label="MRR", higher_is_better=True),
        MetricInfo(column="correctness_0to1", label="correctness", higher_is_better=True),
    ]
    mrr = rng.choice([0.0, 0.25, 0.5, 1.0], size=(2, 40))
    right = rng.binomial(1, 0.6, size=(2, 10)).astype(float)
    values = {
        cell: {
            "mrr": {f"q{i}": float(v) for i, v in enumerate(mrr[c])},
            "correctness_0to1": {f"q{i}": float(v) for i, v in enumerate(right[c])},
        }
        for c, cell in enumerate(["cs64", "cs128"])
    }
    verdicts = compare_cells(metrics, values, StatisticsConfig(resamples=999))
    return "planned-2026", SimpleNamespace(verdicts=verdicts, case_values=values, label_correction=None)


def test_the_plan_says_what_the_sample_can_detect_from_the_latest_run(tmp_path):
    first, mrr, correctness = detection_plan(tmp_path, TWO_CELLS, previous_run())
    assert "planned from the top two cells of run planned-2026" in first and "1 comparison(s)" in first
    assert mrr.startswith("  MRR: on 40 cases the paired test detects a difference of ")  # every case
    assert correctness.startswith("  correctness: on 10 cases")  # the sampled cases only


def test_a_named_difference_the_sample_cannot_detect_is_said_before_the_run(tmp_path):
    lines = detection_plan(tmp_path, TWO_CELLS, previous_run(), "statistics: {detect: 0.02}\n")
    assert all("THIS SAMPLE CANNOT DETECT IT" in line for line in lines[1:])
    assert all("a difference of 0.02 needs about" in line for line in lines[1:])


def test_without_an_earlier_run_the_plan_asks_for_a_pilot_and_one_cell_plans_nothing(tmp_path):
    (line,) = detection_plan(tmp_path / "none", TWO_CELLS, None)
    assert "no earlier run of config planned to plan from" in line and "sample_size=10" in line
    one_cell = "{chunk_size: [64], embedding_model: [m], reader: [openai/r], judge: [openai/j]}"
    assert detection_plan(tmp_path / "one", one_cell, previous_run()) == []


def test_a_latest_run_whose_cells_never_differed_plans_nothing(tmp_path):
    name, table = previous_run()
    same = {cell: table.case_values["cs64"] for cell in ("cs64", "cs128")}
    metrics = [MetricInfo(column="mrr", label="MRR", higher_is_better=True)]
    verdicts = compare_cells(metrics, same, StatisticsConfig(resamples=999))
    _, line = detection_plan(
        tmp_path, TWO_CELLS, (name, SimpleNamespace(verdicts=verdicts, case_values=same))
    )
    assert line == "  MRR: its cells scored the same on every case there: no spread to plan from"


def test_the_plan_reads_the_newest_run_whose_results_table_loads(monkeypatch):
    from steps import history

    class Artifact:
        def __init__(self, table):
            self.table = table

        def load(self):
            if self.table is None:
                raise ModuleNotFoundError("No module named 'ragbench.results'")  # stored by an old version
            return self.table

    def run(name, table=None, steps=True):
        outputs = {"results": [Artifact(table)]}
        return SimpleNamespace(
            name=name, steps={history.RESULTS_STEP: SimpleNamespace(outputs=outputs)} if steps else {}
        )

    runs = [run("failed-early", steps=False), run("old-version"), run("good", "table"), run("older", "other")]
    monkeypatch.setattr(history, "config_runs", lambda name, last: runs)
    assert history.latest_results("planned") == ("good", "table")
    monkeypatch.setattr(history, "config_runs", lambda name, last: runs[:2])
    assert history.latest_results("planned") is None


def test_with_label_correction_the_plan_says_how_many_labels_the_named_difference_needs(tmp_path):
    name, table = previous_run(seed=1)
    rng = np.random.default_rng(2)
    cases = [f"q{i}" for i in range(10)]
    labels = {cell: {case: float(rng.random() < 0.6) for case in cases} for cell in ("cs64", "cs128")}
    corrected = CorrectedMetric(
        column="correctness_0to1",
        label="correctness",
        rubric="correctness",
        criterion="correctness",
        higher_is_better=True,
        plan="uniform:0",
        weighted=False,
        sampled_cases=10,
        cases=10,
        estimates={},
        label_values=labels,
    )
    table.label_correction = LabelCorrection(metrics=[corrected])
    settings = "statistics: {detect: 0.5}\n"
    *_, plain = detection_plan(tmp_path / "plain", TWO_CELLS, (name, table), settings)
    assert "labelled cases" not in plain  # the run corrects nothing with labels
    labelled = "{rubrics: [correctness], judge_check: null, label_correction: {min_labels: 3}}"
    *_, line = detection_plan(tmp_path / "labelled", TWO_CELLS, (name, table), settings, labelled)
    assert line.startswith("  correctness: on 10 cases") and "; with labels, " in line
    table.label_correction = LabelCorrection(metrics=[corrected.model_copy(update={"weighted": True})])
    *_, weighted = detection_plan(tmp_path / "weighted", TWO_CELLS, (name, table), settings, labelled)
    assert weighted.endswith("labels for it are not planned for a weighted (uncertainty-first) sample")


def test_a_run_with_a_named_difference_says_what_it_can_decide_before_it_starts(
    tmp_path, monkeypatch, capsys
):
    import pipelines.inputs
    from cli import benchmark
    from ragbench.config import plan
    from ragbench.config.preflight import Preflight
    from ragbench.inputs.eval_cases import EvalSuite
    from ragbench.inputs.knowledge_base import Corpus

    cases = [EvalCase.model_validate(c) for c in CASES]
    checked = Preflight(
        corpus=Corpus(documents=[], fingerprint="k", description="a"), eval_suite=EvalSuite.of(cases)
    )
    # the real run's checks ask for models and keys, and its snapshots for the store: not the point here
    monkeypatch.setattr(plan, "run_preflight", lambda config, **kwargs: checked)
    monkeypatch.setattr(benchmark, "earlier_runs", lambda use_cache: plan.NO_EARLIER_RUNS)
    nothing_stored = pipelines.inputs.InputSnapshots()
    monkeypatch.setattr(pipelines.inputs, "plan_snapshots", lambda run_plan: nothing_stored)
    for detect in (None, 0.05):
        write_project(
            tmp_path,
            {"a.md": "# A\nA is the first letter."},
            CASES,
            f"grid: {TWO_CELLS}\nevaluation: {CORRECTNESS}\nstatistics: {{detect: {detect or 'null'}}}\n",
        )
        parameters = benchmark.benchmark_preflight(load_config(tmp_path / "config.yaml"))
        # the plan the run carries to its report: every sampled case answered and judged by both cells
        assert parameters["planned"]["calls"] > 0 and parameters["planned"]["retry_rate"] == 0.0
        printed = capsys.readouterr().out
        if detect is None:
            assert printed == ""  # nothing to decide, nothing said
        else:
            assert printed.startswith("What the run can decide: no earlier run of config")
