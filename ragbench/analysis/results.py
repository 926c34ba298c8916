"""The results of a run, cell by cell: the rows of the table, the per-case records, the headline metrics,
computed from the stage results the pipeline made, looked up for each cell by its stage keys."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cached_property

from pydantic import BaseModel

from ragbench.analysis.case_types import case_type_rows, turn_mode_rows
from ragbench.analysis.columns import generation_case_values, generation_columns
from ragbench.analysis.completeness import stopped_by_budget
from ragbench.analysis.judge_card import JudgeCard
from ragbench.analysis.judge_reliability import JudgedCase, JudgeReliability, judge_reliability
from ragbench.analysis.judge_repeats import runs_repeatability, widen_rows
from ragbench.analysis.label_verdicts import corrected_verdicts
from ragbench.analysis.labelled import LabelCorrection, correct_with_labels, corrected_keys
from ragbench.analysis.racing import RaceTrace
from ragbench.analysis.reranking import RerankGain, rerank_gains
from ragbench.analysis.results_inputs import ResultsInputs
from ragbench.analysis.rewriting import RewriteGain, rewrite_gains
from ragbench.analysis.search_findings import SearchFindings
from ragbench.analysis.spend import RunSpend
from ragbench.analysis.uncertainty import CaseValues, MetricVerdict, compare_cells, with_intervals
from ragbench.generation.answers import AnswerSet
from ragbench.generation.reader import ReaderAnswer
from ragbench.grid.cell import AxisNames, CellSpec, cell_labels, distinct_at, llm_names, varying_axes
from ragbench.inputs.eval_cases import EvalCase
from ragbench.inputs.references import ReferenceResolutions
from ragbench.inputs.tables import rows_to_csv
from ragbench.inputs.traces import TraceReading
from ragbench.llm.budget import BUDGET_ADVICE
from ragbench.provenance import CodeVersion
from ragbench.retrieval.rerank_stage import RerankResult, ranking_case_values, ranking_columns
from ragbench.retrieval.search import RetrievalResult
from ragbench.review.alignment import JudgeAlignment, aligned_judge
from ragbench.scoring.cells import JudgeResult, keyword_report
from ragbench.scoring.judge import Judgement
from ragbench.scoring.keyword_tests import KeywordFailure, KeywordReport, Suite
from ragbench.scoring.metrics import MetricInfo, ranking_metrics
from ragbench.scoring.pairwise import PairwiseResult
from ragbench.scoring.registry import present
from ragbench.scoring.rubrics import checked_criterion


class CaseRecord(BaseModel):
    """One (cell, case): the question, the passages with sources and ranks, the answer, what judged it."""

    cell: str
    case_id: str
    question: str
    answer: ReaderAnswer
    reranker: str
    keyword_failures: list[KeywordFailure]
    judgement: Judgement | None


class CaseRecords(BaseModel):
    """All per-case records of a run, one artifact (not one sub-artifact per record)."""

    records: list[CaseRecord]

    def jsonl(self) -> str:
        """One flat line per (cell, case): the answer's fields beside what tested and judged it."""
        lines = [
            json.dumps(
                {"cell": r.cell, "reranker": r.reranker, **r.answer.model_dump(mode="json")}
                | {"keyword_failures": [f.model_dump() for f in r.keyword_failures]}
                | {"judgement": r.judgement.model_dump() if r.judgement else None},
                ensure_ascii=False,
            )
            for r in self.records
        ]
        return "\n".join(lines) + ("\n" if lines else "")


def _by_key(results: Sequence[AnswerSet] | Sequence[JudgeResult]) -> dict[str, list]:
    grouped: dict[str, list] = {}
    for result in results:
        grouped.setdefault(result.spec.id, []).append(result)
    return grouped


class CellResults(BaseModel):
    """Every stage result of a run, indexed by stage key: what the results step assembles rows from."""

    cells: list[CellSpec]
    retrievals: dict[str, RetrievalResult]
    reranks: dict[str, RerankResult] = {}  # by rerank key: the ranking a reranking cell's reader reads
    answer_sets: dict[str, AnswerSet]
    judged: dict[str, JudgeResult]
    keyword: dict[str, KeywordReport]
    human_labels: dict[str, int] = {}  # case id -> a person's correctness score of its human_answer

    @classmethod
    def collect(
        cls,
        cells: Sequence[CellSpec],
        retrievals: Sequence[RetrievalResult],
        answer_sets: Sequence[AnswerSet],
        judged: Sequence[JudgeResult],
        cases: Sequence[EvalCase],
        suites: Sequence[Suite],
        reranks: Sequence[RerankResult] = (),
    ) -> CellResults:
        """The stage results by key; a key answered or judged in rounds (a race) has its parts joined."""
        answers = {
            key: parts[0] if len(parts) == 1 else AnswerSet.joined(parts)
            for key, parts in _by_key(answer_sets).items()
        }
        return cls(
            cells=list(cells),
            retrievals={r.spec.id: r for r in retrievals}
            | {
                a.spec.upto("retrieve").id: a.external.retrieval
                for a in answers.values()
                if a.external is not None and a.external.retrieval is not None
            },
            reranks={r.spec.id: r for r in reranks},
            answer_sets=answers,
            judged={key: JudgeResult.joined(parts) for key, parts in _by_key(judged).items()},
            keyword={key: keyword_report(a, cases, suites) for key, a in answers.items()} if suites else {},
            human_labels={c.id: c.human_correctness for c in cases if c.human_correctness is not None},
        )

    def answers_of(self, cell: CellSpec) -> AnswerSet | None:
        answers = cell.reader is not None or cell.external is not None
        return self.answer_sets.get(cell.upto("answer").id) if answers else None

    def judged_of(self, cell: CellSpec) -> JudgeResult | None:
        return self.judged.get(cell.id) if cell.judge is not None else None

    def reranked_of(self, cell: CellSpec) -> RerankResult | None:
        return self.reranks[cell.upto("rerank").id] if cell.reranker is not None else None

    def case_values(self, cell: CellSpec) -> CaseValues:
        """Every per-case value behind the cell's row (column -> case id -> value), retrieval's at both
        rankings (`ranking_case_values`)."""
        retrieval = self.retrievals.get(cell.upto("retrieve").id)  # None: a system that returned no sources
        values = ranking_case_values(cell, retrieval, self.reranked_of(cell)) if retrieval is not None else {}
        answers = self.answers_of(cell)
        if answers is not None:
            values |= generation_case_values(self.keyword.get(answers.spec.id), self.judged_of(cell))
        return values

    @cached_property
    def llm_names(self) -> AxisNames:
        return llm_names(self.cells)

    def axis_columns(self, cell: CellSpec) -> dict:
        """The cell's axes as table columns, its reranker as really used (the UNTRAINED stand-in says so)."""
        axes = cell.axis_columns(self.llm_names)
        if cell.reranker is not None and (reranked := self.reranks.get(cell.upto("rerank").id)):
            axes["reranker"] = reranked.reranker.label  # a retrieval-only cell has no answers to say it
        elif (answers := self.answers_of(cell)) is not None:
            axes["reranker"] = answers.reranker_label
        return axes

    def labels(self, varying: list[str]) -> dict[str, str]:
        """cell id -> its unique label (see `cell_labels`)."""
        return cell_labels(self.cells, varying, {cell.id: self.axis_columns(cell) for cell in self.cells})

    def judge_name(self, cell: CellSpec) -> str:
        return self.axis_columns(cell)["judge"]

    def rows(self, varying: list[str]) -> list[dict]:
        """One row per cell: its axis values, retrieval metrics (all cases) and end-to-end scores."""
        rows = []
        labels = self.labels(varying)
        for cell in self.cells:
            axes = self.axis_columns(cell)
            answers = self.answers_of(cell)
            row = {"cell": cell.id, "label": labels[cell.id], **axes}
            if (retrieval := self.retrievals.get(cell.upto("retrieve").id)) is not None:
                row |= ranking_columns(cell, retrieval, self.reranked_of(cell))
            if answers is not None:
                keyword = self.keyword.get(answers.spec.id)
                row |= generation_columns(answers, keyword, self.judged_of(cell))
            rows.append(row)
        return rows

    def case_records(self) -> CaseRecords:
        records = []
        for cell in self.cells:
            answers = self.answers_of(cell)
            if answers is None:
                continue
            judged = self.judged_of(cell)
            verdicts = {j.case_id: j for j in judged.judgements} if judged else {}
            keyword = self.keyword.get(answers.spec.id)
            failures = keyword.failing if keyword else []
            records += [
                CaseRecord(
                    cell=cell.id,
                    case_id=answer.case_id,
                    question=answer.question,
                    answer=answer,
                    reranker=answers.reranker_label,
                    keyword_failures=[f for f in failures if f.case_id == answer.case_id],
                    judgement=verdicts.get(answer.case_id),
                )
                for answer in answers.answers
            ]
        return CaseRecords(records=records)

    def judged_cases(self, labels: dict[str, str], varying: list[str]) -> list[JudgedCase]:
        """Every score of the criterion the judge is checked on (`Criterion.checks_judge`) with the keyword
        tests of its answer; answer sets are named by the varying axes before the judge."""
        before_judge = [axis for axis in varying if CellSpec.stage_of(axis) != "judge"]
        keys = distinct_at(self.cells, "answer")
        checked = {
            cell.id: checked_criterion(result.rubrics)
            for cell in self.cells
            if (result := self.judged_of(cell))
        }
        answer_sets = cell_labels(keys, before_judge, {key.id: self.axis_columns(key) for key in keys})
        judged = []
        for cell in self.cells:
            answers, result = self.answers_of(cell), self.judged_of(cell)
            if answers is None or result is None or (criterion := checked[cell.id]) is None:
                continue
            keyword = self.keyword.get(answers.spec.id)
            tested = (
                {case for outcomes in keyword.outcomes.values() for case in outcomes} if keyword else set()
            )
            failing = keyword.failing if keyword else []
            judged += [
                JudgedCase(
                    cell=labels[cell.id],
                    answer_set=answer_sets[cell.upto("answer").id],
                    judge=self.judge_name(cell),
                    case_id=j.case_id,
                    correctness=j.scores[criterion.name],
                    keyword_failures=[f"{f.suite}: {f.word}" for f in failing if f.case_id == j.case_id],
                    keyword_tested=j.case_id in tested,
                )
                for j in result.judgements
                if criterion.name in j.scores
            ]
        return judged

    def sampled_scores(self) -> dict[str, dict[str, list[list[int]]]]:
        """judge -> criterion -> per answer, every sampled score (first sample first), for the answers
        judged more than once (evaluation.judge_samples > 1)."""
        sampled: dict[str, dict[str, list[list[int]]]] = {}
        for cell in self.cells:
            result = self.judged_of(cell)
            if result is None:
                continue
            by_criterion = sampled.setdefault(self.judge_name(cell), {})
            for j in result.judgements:
                for criterion, repeats in j.resampled.items():
                    first = j.scores.get(criterion)
                    if first is not None and repeats:
                        by_criterion.setdefault(criterion, []).append([first, *repeats])
        return sampled

    def labelled_scores(self) -> dict[str, list[tuple[int, int]]]:
        """judge -> (person's score, judge's score) per human-labelled answer it graded (once per judge,
        however many cells it judges)."""
        by_judge: dict[str, dict[str, tuple[int, int]]] = {}
        for cell in self.cells:
            result = self.judged_of(cell)
            criterion = checked_criterion(result.rubrics) if result is not None else None
            for j in result.calibration if result is not None and criterion is not None else []:
                if criterion.name in j.scores and j.case_id in self.human_labels:
                    pair = (self.human_labels[j.case_id], j.scores[criterion.name])
                    by_judge.setdefault(self.judge_name(cell), {})[j.case_id] = pair
        return {judge: list(pairs.values()) for judge, pairs in by_judge.items()}

    def incomplete(self, labels: Mapping[str, str]) -> dict[str, str]:
        """cell id -> why a metric the config asked for has no value in that cell although it had cases to
        score: every reader (or system) call failed, or every verdict of a rubric failed (a judge that was
        down). Such a run fails its gate and never becomes a baseline."""
        why: dict[str, str] = {}
        for cell in self.cells:
            answers = self.answers_of(cell)
            retrieval = self.retrievals.get(cell.upto("retrieve").id)
            rewrite = retrieval.rewrite if retrieval is not None else None
            if stopped := stopped_by_budget(cell, rewrite, answers, self.judged_of(cell)):
                why[cell.id] = f"the spend cap stopped {stopped} in cell {labels[cell.id]} " + BUDGET_ADVICE
                continue
            if answers is None or not answers.answers:
                continue
            produced = [a for a in answers.answers if a.answer is not None]
            if not produced:
                errors = [a.error for a in answers.answers if a.error]
                who = "call to the system" if cell.external else "reader call"
                why[cell.id] = (
                    f"every {who} failed in cell {labels[cell.id]}; last error: "
                    f"{errors[-1] if errors else 'unknown'}"
                )
                continue
            judged = self.judged_of(cell)
            if judged is None:
                continue
            scored_by = {
                rubric.name: any(c.name in j.scores for j in judged.judgements for c in rubric.criteria)
                for rubric in judged.rubrics
            } | {
                name: any(column in j.values for j in judged.judgements for column in columns)
                for name, columns in judged.scorers.items()
            }
            for name, scored in scored_by.items():
                failed = [j.errors[name] for j in judged.judgements if name in j.errors]
                if failed and not scored:
                    why[cell.id] = (
                        f"the judge could not score {name} on any of its {len(failed)} answer(s) in "
                        f"cell {labels[cell.id]}; last error: {failed[-1]}"
                    )
                    break
        return why

    def judgements(self) -> list[Judgement]:
        return [j for result in self.judged.values() for j in result.judgements]


class ResultsTable(BaseModel):
    """The run's table and its report page: one typed artifact, shown as CSV and HTML in the dashboard."""

    title: str
    rows: list[dict]
    headline: list[MetricInfo]
    notes: list[str]
    warnings: list[str]
    report_html: str = ""  # the report page (`ragbench.report.run_page.run_report`), set by the results step
    varying_axes: list[str] = []  # the axes that vary between the cells, which the report charts by
    case_values: dict[str, CaseValues] = {}  # cell id -> column -> case id -> value
    verdicts: list[MetricVerdict] = []  # per headline metric: the best cell against the others
    ranking: list[MetricInfo] = []  # the retrieval metrics at both rankings the rows have (`ranking_metrics`)
    rerank_gains: list[RerankGain] = []  # per reranking cell and metric: reranked against the first stage
    rewrite_gains: list[RewriteGain] = []  # per rewriting cell, metric and case group: against its `off` twin
    confidence: float = 0.95
    judge_reliability: JudgeReliability | None = None
    eval_set: str = ""  # which eval set the cases came from (EvalSuite.label)
    eval_fingerprint: str = ""  # the eval cases' content hash: the gate compares runs on the same cases
    knowledge_base_fingerprint: str = ""
    case_type_rows: list[dict] = []  # per (cell, case type): each headline score's mean, interval, cases
    turn_mode_rows: list[dict] = []  # the same per (cell, turn mode: given or generated earlier turns)
    # cell id -> why the run could not score it (every reader call failed, or a configured metric got no
    # value because every verdict of its rubric failed): the gate fails such a run
    incomplete: dict[str, str] = {}
    pairwise: list[PairwiseResult] = []  # evaluation.pairwise: each answer set against the baseline
    configured_metrics: list[str] = []  # the tracked metric keys the config asked for, computed or not
    judge_cards: list[JudgeCard] = []  # each judge on planted errors (evaluation.judge_check)
    race: RaceTrace | None = None  # search: race, the elimination trace (rows say each cell's outcome)
    search: SearchFindings | None = None  # a staged search's decisions and confirmation
    judge_alignments: list[JudgeAlignment] = []  # each judge against a person's labels, before/after aligned
    references: ReferenceResolutions | None = None  # what this run fetched for reference_from cases
    spend: RunSpend | None = None  # what the run sent per role, beside its plan (the results step's)
    label_correction: LabelCorrection | None = None  # judged metrics corrected by a person's sampled labels
    judge_only_verdicts: list[MetricVerdict] = []  # the judge's verdicts where corrected ones replace them
    code: CodeVersion | None = None  # the code the run ran (release, client's commit, packages)
    traffic: TraceReading | None = None  # how the cases were read from the deployed system's traces

    def csv(self) -> str:
        return rows_to_csv(self.rows)

    def case_type_csv(self) -> str:
        """The scores broken down by case type, one line per (cell, case type); empty when the eval set
        has fewer than two case types."""
        return rows_to_csv(self.case_type_rows)

    def case_values_csv(self) -> str:
        """One line per (cell, metric, case): every number of the table traces back to these."""
        labels = {row["cell"]: row["label"] for row in self.rows}
        return rows_to_csv(
            [
                {
                    "cell": cell,
                    "label": labels.get(cell, cell),
                    "metric": column,
                    "case": case,
                    "value": value,
                }
                for cell, values in self.case_values.items()
                for column, by_case in values.items()
                for case, value in by_case.items()
            ]
        )


def build_results(results: CellResults, inputs: ResultsInputs) -> tuple[ResultsTable, CaseRecords]:
    """The table and the per-case records of a run, from its stage results and what else it found
    (`ResultsInputs`). The report page is drawn from them by `ragbench.report.run_page.run_report`."""
    scoring, statistics, eval_suite, label_correction = (
        inputs.scoring,
        inputs.statistics,
        inputs.eval_suite,
        inputs.label_correction,
    )
    cases, traffic = (eval_suite.cases, eval_suite.traces) if eval_suite is not None else ([], None)
    varying = varying_axes(results.cells)
    case_values = {cell.id: results.case_values(cell) for cell in results.cells}
    scales = {metric.column: metric for metric in [*scoring.metrics(), *ranking_metrics(scoring.metrics_k)]}
    rows = [
        with_intervals(row, case_values[row["cell"]], statistics, scales, traffic)
        | {"reused": row["cell"] in inputs.reused_cells}
        for row in results.rows(varying)
    ]
    unreliable = {card.judge: card for card in inputs.judge_cards if not card.reliable}
    graded = {rubric.name for rubric in scoring.rubrics}
    for row in rows:
        if (card := unreliable.get(row.get("judge"))) is not None and card.rubric in graded:
            caught = card.overall_detection
            row["judge_check"] = f"UNRELIABLE ({card.rubric}: caught {caught.detected}/{caught.n} planted)"
    warnings = inputs.warnings + [
        f"Judge {card.judge} is UNRELIABLE for {card.rubric}: {card.summary()}; read its {card.rubric} "
        "scores as noise until a stronger judge or a person's labels say otherwise."
        for card in unreliable.values()
    ]
    if inputs.references is not None and (failed := inputs.references.failures()):
        warnings.append(
            f"{len(failed)} case(s) FAILED: their reference could not be fetched, so nothing that needs it "
            "is scored on them: " + "; ".join(f"{case}: {why}" for case, why in failed.items())
        )
    rows = [row | aligned_judge(row.get("judge"), inputs.judge_alignments) for row in rows]
    labels = {row["cell"]: row["label"] for row in rows}
    incomplete = results.incomplete(labels)
    warnings += [f"INCOMPLETE: {why}" for why in incomplete.values()]
    if inputs.search is not None:
        specs = {cell.id: cell for cell in results.cells}
        rows = [
            row | {"search": inputs.search.status(specs[row["cell"]], inputs.race, labels)} for row in rows
        ]
    elif inputs.race is not None:
        rows = [row | {"race": inputs.race.status(row["cell"], labels)} for row in rows]
    headline = present(scoring.headline(), rows)
    ranking = present(ranking_metrics(scoring.metrics_k), rows)
    records = results.case_records()
    verdicts = compare_cells(headline, case_values, statistics, labels)
    if inputs.search is not None:  # the search's metric judged on the held-out cases alone
        verdicts = inputs.search.confirmed_verdicts(verdicts, headline, case_values, statistics, labels)
    correction, judge_only = None, []
    if label_correction is not None and inputs.labels_given is not None:
        correction = correct_with_labels(
            inputs.labels_given,
            records=records.records,
            cases=cases,
            judge_of_cell={row["cell"]: str(row["judge"]) for row in rows if row.get("judge")},
            rubrics=scoring.rubrics,
            judge_values=case_values,
            config=label_correction,
            confidence=statistics.confidence,
            traffic=traffic,
        )
        rows = [row | correction.columns(row["cell"]) for row in rows]
        corrected, why = corrected_verdicts(
            correction,
            headline,
            case_values,
            labels,
            min_labels=label_correction.min_labels,
            settings=statistics,
        )
        correction.notes.extend(why)
        judge_only = [v for v in verdicts if v.column in corrected]
        verdicts = [corrected.get(v.column, v) for v in verdicts]
    repeated = runs_repeatability(results.cells, results.judged_of, results.judge_name, labels)
    rows = widen_rows(rows, repeated, case_values, statistics, scales)
    reliability = judge_reliability(
        results.judged_cases(labels, varying), results.sampled_scores(), results.labelled_scores(), repeated
    )
    case_types = {case.id: case.case_type for case in cases}
    table = ResultsTable(
        title=inputs.title,
        rows=rows,
        headline=headline,
        notes=inputs.notes,
        warnings=warnings,
        varying_axes=varying,
        case_values=case_values,
        verdicts=verdicts,
        ranking=ranking,
        rerank_gains=rerank_gains(results.cells, case_values, ranking, statistics),
        rewrite_gains=rewrite_gains(
            results.cells, case_values, ranking, {case.id for case in cases if case.history}, statistics
        ),
        confidence=statistics.confidence,
        judge_reliability=reliability,
        eval_set=eval_suite.label if eval_suite is not None else "",
        eval_fingerprint=eval_suite.fingerprint if eval_suite is not None else "",
        traffic=traffic,
        knowledge_base_fingerprint=inputs.knowledge_base_fingerprint,
        case_type_rows=case_type_rows(headline, case_values, labels, case_types, statistics),
        turn_mode_rows=turn_mode_rows(headline, case_values, labels, cases, statistics),
        incomplete=incomplete,
        pairwise=list(inputs.pairwise),
        configured_metrics=scoring.tracked_keys() + corrected_keys(headline, scoring, label_correction),
        judge_cards=list(inputs.judge_cards),
        race=inputs.race,
        search=inputs.search,
        judge_alignments=list(inputs.judge_alignments),
        references=inputs.references,
        label_correction=correction,
        judge_only_verdicts=judge_only,
    )
    return table, records
