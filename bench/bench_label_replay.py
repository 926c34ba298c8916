"""Labels that correct the numbers, on real answers: the review example's two local readers
(configs/review_readers.yaml, judged by the local 1.5B) corrected with labels drawn the way the review
page's sample orders draw them, with a person's labels of all 64 answers (configs/labels/review_readers.jsonl)
as the oracle: the person's mean over every answer is the number the corrected estimate should find.

For each plan (uniform, uncertain), label count and draw (the plan's seed), a review session labels the
first cases of the plan's queue with the oracle's values, as a person would on the page, and the run's
correction (`ragbench.analysis.labelled`, the code a run uses) gives each reader's corrected correctness
and the corrected verdict between them. Printed per reader: the judge alone, the person on every answer,
the corrected mean and interval averaged over the draws, how often the interval covers the person's
mean, the labels the estimate is worth, and how often the readers' order (and a significant verdict)
holds.

    .venv/bin/python run.py --config configs/review_readers.yaml   # once: the answers and the verdicts
    .venv/bin/python bench/bench_label_replay.py --export  # that run -> bench/data/review_readers_replay.json
    .venv/bin/python bench/bench_label_replay.py [--draws 20] [--labels 20 40]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from statistics import fmean as mean

ROOT = Path(__file__).resolve().parent.parent

from ragbench.analysis.label_verdicts import corrected_verdicts  # noqa: E402
from ragbench.analysis.labelled import correct_with_labels  # noqa: E402
from ragbench.analysis.results import CaseRecords  # noqa: E402
from ragbench.inputs.eval_cases import EvalCase  # noqa: E402
from ragbench.report.pages import rows_to_text  # noqa: E402
from ragbench.review.labels import LabelStore, load_labels_file, text_sha  # noqa: E402
from ragbench.review.queue import answer_items  # noqa: E402
from ragbench.review.sampling import SAMPLE_ORDERS  # noqa: E402
from ragbench.review.server import ReviewSession  # noqa: E402
from ragbench.scoring.registry import LabelCorrectionConfig  # noqa: E402
from ragbench.scoring.rubrics import BUILTIN_RUBRICS  # noqa: E402
from ragbench.stats.inference import StatisticsConfig  # noqa: E402

SNAPSHOT = ROOT / "bench" / "data" / "review_readers_replay.json"
ORACLE = ROOT / "configs" / "labels" / "review_readers.jsonl"
CONFIG_NAME = "review-readers"
RUBRIC = BUILTIN_RUBRICS["correctness"]
CRITERION = RUBRIC.criteria[0]


def export(path: Path) -> None:
    """The newest completed run of the review example: its answers, verdicts and cases, as one JSON file."""
    from zenml.client import Client

    from ragbench.runs.compare import config_tag
    from ragbench.runs.names import BENCHMARK_PIPELINE, RESOLVED_CASES_STEP, RESULTS_STEP

    client = Client()
    runs = client.list_pipeline_runs(
        pipeline_id=client.get_pipeline(BENCHMARK_PIPELINE).id,
        tags=[f"equals:{config_tag(CONFIG_NAME)}"],
        sort_by="desc:created",
        size=10,
    ).items
    run = next(run for run in runs if run.status.value == "completed")
    results = run.steps[RESULTS_STEP]
    table = results.outputs["results"][0].load()
    records = results.outputs["case_records"][0].load()
    cases = run.steps[RESOLVED_CASES_STEP].outputs["eval_cases_resolved"][0].load().cases
    snapshot = {
        "run": run.name,
        "names": {row["cell"]: row["label"] for row in table.rows},
        "judge_of_cell": {row["cell"]: str(row["judge"]) for row in table.rows if row.get("judge")},
        "case_values": {
            cell: {CRITERION.column: v[CRITERION.column]} for cell, v in table.case_values.items()
        },
        "cases": [case.model_dump(mode="json") for case in cases],
        "records": records.model_dump(mode="json"),
    }
    path.write_text(json.dumps(snapshot, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"exported {run.name}: {len(records.records)} answers -> {path}")


def replay(path: Path, draws: int, counts: list[int], min_labels: int) -> None:
    snapshot = json.loads(path.read_text(encoding="utf-8"))
    records = CaseRecords.model_validate(snapshot["records"]).records
    cases = [EvalCase.model_validate(case) for case in snapshot["cases"]]
    names, judge_of_cell = snapshot["names"], snapshot["judge_of_cell"]
    case_values = snapshot["case_values"]
    oracle = {
        "|".join(label.key): label.value for label in load_labels_file(ORACLE).of(RUBRIC.name, CRITERION.name)
    }
    items = answer_items(records, cases, judge_of_cell, RUBRIC)
    missing = [item.key for item in items if item.key not in oracle]
    if missing:
        raise SystemExit(f"{len(missing)} answer(s) of the run have no oracle label (answers changed since)")
    person = {
        cell: mean(
            CRITERION.case_value(
                oracle[f"{r.case_id}|{text_sha(r.answer.answer)}|{RUBRIC.name}|{CRITERION.name}"]
            )
            for r in records
            if r.cell == cell and r.answer.answer is not None
        )
        for cell in names
    }
    judge_alone = {cell: mean(values[CRITERION.column].values()) for cell, values in case_values.items()}
    print(f"{snapshot['run']}: {len(items)} answers of {len(cases)} cases; oracle: {ORACLE.name}")
    config = LabelCorrectionConfig(labels=str(ORACLE), min_labels=min_labels)
    settings = StatisticsConfig()
    rows = []
    for order in SAMPLE_ORDERS:
        for count in counts:
            found: dict[str, list] = {cell: [] for cell in names}
            leads: list[str] = []
            significant = 0
            for seed in range(draws):
                correction = _draw(
                    items, oracle, order, seed, count, records, cases, judge_of_cell, case_values, config
                )
                metric = correction.of(CRITERION.column)
                for cell, estimate in metric.estimates.items():
                    found[cell].append(estimate)
                verdicts, _ = corrected_verdicts(
                    correction,
                    [CRITERION.metric],
                    case_values,
                    names,
                    min_labels=min_labels,
                    settings=settings,
                )
                if (verdict := verdicts.get(CRITERION.column)) is not None:
                    leads.append(verdict.best)
                    significant += verdict.comparison_of(verdict.runner_up).verdict != "tied"
            for cell, label in sorted(names.items(), key=lambda kv: kv[1]):
                estimates, truth = [e for e in found[cell] if e.estimate is not None], person[cell]
                rows.append(
                    {
                        "plan": order,
                        "labels": count,
                        "reader": label.split("/")[-1],
                        "judge_alone": f"{judge_alone[cell]:.3f}",
                        "person_all": f"{person[cell]:.3f}",
                        "corrected": f"{mean(e.estimate for e in estimates):.3f}",
                        "low": f"{mean(e.low for e in estimates):.3f}",
                        "high": f"{mean(e.high for e in estimates):.3f}",
                        "labels_alone_width": f"{mean(e.labels_high - e.labels_low for e in estimates):.3f}",
                        "width": f"{mean(e.high - e.low for e in estimates):.3f}",
                        "covers": f"{sum(e.low <= truth <= e.high for e in estimates)}/{len(estimates)}",
                        "worth": f"{mean(e.effective_labels for e in estimates):.1f}",
                        "leads": f"{leads.count(cell)}/{draws}",
                    }
                )
            print(
                f"{order}, {count} labels: a verdict in {len(leads)}/{draws} draws, "
                f"significant in {significant}"
            )
    print(rows_to_text(rows))


def _draw(items, oracle, order, seed, count, records, cases, judge_of_cell, case_values, config):
    """One person labelling the first answers of `order`'s queue (whole cases, `count` answers at least)
    with the oracle's values, then the run's correction."""
    with tempfile.TemporaryDirectory() as folder:
        store = LabelStore(Path(folder) / "labels.jsonl")
        session = ReviewSession(items, store, title="replay", seed=seed)
        given, last_case = 0, None
        for item in session.queue(order):
            case = item.input.case_id
            if given >= count and case != last_case:
                break
            session.label(item.key, oracle[item.key], order=order)
            given, last_case = given + 1, case
        return correct_with_labels(
            store.labels,
            records=records,
            cases=cases,
            judge_of_cell=judge_of_cell,
            rubrics=[RUBRIC],
            judge_values=case_values,
            config=config,
            confidence=0.95,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--export", action="store_true", help="write the newest review-readers run to the snapshot"
    )
    parser.add_argument("--snapshot", type=Path, default=SNAPSHOT)
    parser.add_argument("--draws", type=int, default=20, help="draws (plan seeds) per plan and label count")
    parser.add_argument("--labels", type=int, nargs="+", default=[20, 40], help="labelled answers per draw")
    parser.add_argument("--min-labels", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="2 draws of 20 labels (tests)")
    args = parser.parse_args()
    if args.export:
        export(args.snapshot)
        return
    if args.smoke:
        args.draws, args.labels = 2, [20]
    replay(args.snapshot, args.draws, args.labels, args.min_labels)


if __name__ == "__main__":
    main()
