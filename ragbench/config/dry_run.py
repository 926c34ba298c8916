"""`run.py --dry-run`: every cell of the grid with the LLM calls, tokens and cost it would add, and
whether earlier runs already made its steps; it calls no LLM, needs no API key and downloads nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ragbench.analysis.label_verdicts import paired_labels
from ragbench.analysis.planning import PlannedTest, labels_needed, plan
from ragbench.analysis.uncertainty import MetricVerdict, top_two_differences
from ragbench.config.expand import rewriter_settings
from ragbench.config.model import BenchmarkConfig
from ragbench.generation.answers import sample_cases
from ragbench.generation.turns import planned_reader_requests
from ragbench.grid.cell import (
    STAGES,
    CellSpec,
    cell_labels,
    distinct_at,
    llm_names,
    pairwise_pairs,
    reranker_numbers,
)
from ragbench.inputs.conversation import placeholder_history
from ragbench.inputs.eval_cases import EvalCase, searched_cases
from ragbench.llm.budget import PlannedSpend
from ragbench.llm.pricing import estimate_cost
from ragbench.llm.types import LLMRequest
from ragbench.retrieval.measures import is_retrieval_column
from ragbench.retrieval.rerank import RerankerChoice
from ragbench.retrieval.retrievers import row_step_ids
from ragbench.retrieval.rewrite import follow_up_rewrite_requests, rewrite_requests
from ragbench.retrieval.search import RetrievedChunk
from ragbench.scoring.cells import calibration_inputs
from ragbench.scoring.judge import build_judge_calls
from ragbench.scoring.pairwise import PairwiseInput, build_pairwise_calls
from ragbench.scoring.planted import PLANTED_KINDS
from ragbench.scoring.registry import Scoring
from ragbench.scoring.repeats import JudgeRepeatsConfig, repeat_calls
from ragbench.scoring.rubrics import JudgeInput, checked_rubric
from ragbench.scoring.scorer import Scorer

if TYPE_CHECKING:
    from ragbench.analysis.results import ResultsTable


def _placeholder_context(chunk_size: int, top_n: int) -> list[RetrievedChunk]:
    """Passages as long as the chunk size allows: an upper bound on what the reader will see."""
    text = " ".join(["token"] * chunk_size)
    return [RetrievedChunk(position=i, source=f"doc-{i}", score=0.0, text=text) for i in range(top_n)]


# What an external system returns is unknown before it is asked: its judge calls are priced as if it
# returned this many passages of this many tokens, with an answer of this many words.
EXTERNAL_PASSAGES, EXTERNAL_PASSAGE_TOKENS, EXTERNAL_ANSWER_WORDS = 5, 256, 128
# The estimate's one assumption about a grid reader's answers, printed beside it: the reader is priced for
# max_tokens of completion (`estimate_cost`), and every judge reads an answer that long.
ANSWER_ASSUMPTION = "completion tokens assume every answer uses max_tokens, and judges read answers that long"


def placeholder_answer(words: int) -> str:
    """An answer of `words` words, about one token each."""
    return " ".join(["word"] * words)


def _scorer_requests(
    inputs: list[JudgeInput], scorers: tuple[Scorer, ...], samples: int = 1
) -> list[LLMRequest]:
    """The scorers' calls, each priced as one prompt holding the whole case: their later prompts depend on
    earlier replies (statements, generated questions), so their number and size are estimates. A scorer
    that gives verdicts is asked `samples` times (`apply_scorers`)."""
    return [
        LLMRequest(
            messages="\n".join([item.question, item.answer, item.reference_answer or "", *item.contexts])
        )
        for item in inputs
        for scorer in scorers
        if scorer.missing(item) is None
        for _ in range(scorer.planned_calls(item) * (samples if scorer.gives_verdicts else 1))
    ]


def _usage(
    role: str,
    cell: CellSpec,
    cases: list[EvalCase],
    scoring: Scoring,
    samples: int = 1,
    repeats: JudgeRepeatsConfig | None = None,
) -> dict:
    """Calls, prompt tokens (counted) and completion tokens (max_tokens each) of one stage of a cell; the
    judge's with its `repeats` (`evaluation.judge_repeats`), which the judge step asks."""
    if cell.external is not None:
        context = _placeholder_context(EXTERNAL_PASSAGE_TOKENS, EXTERNAL_PASSAGES)
        answer = placeholder_answer(EXTERNAL_ANSWER_WORDS)
    else:
        assert cell.reader is not None and cell.top_n is not None and cell.prompt is not None
        assert cell.chunk_size is not None
        context = _placeholder_context(cell.chunk_size, cell.top_n)
        answer = placeholder_answer(cell.reader.max_tokens)  # ANSWER_ASSUMPTION
        if role == "reader":
            return estimate_cost(cell.reader, planned_reader_requests(cases, context, cell.prompt, answer))
    assert cell.judge is not None
    inputs = [
        JudgeInput(
            case_id=case.id,
            question=case.question,
            history=placeholder_history(case.history, answer),
            answer=answer,
            # a reference fetched at run time is priced as if it were there (a placeholder of its own)
            reference_answer=case.reference_answer
            or ("fetched at run time" if case.reference_from else None),
            contexts=[chunk.text for chunk in context],
            tags=case.tags,
        )
        for case in cases
    ]
    if role == "pairwise":
        pairs = [
            PairwiseInput(
                case_id=item.case_id,
                question=item.question,
                candidate_answer=answer,
                baseline_answer=answer,
                reference_answer=item.reference_answer,
            )
            for item in inputs
        ]
        return estimate_cost(cell.judge, [call.request for call in build_pairwise_calls(pairs)])
    calls = build_judge_calls(inputs, scoring.rubrics, samples=samples)
    if (checked := checked_rubric(scoring.rubrics)) is not None:
        calls += build_judge_calls(calibration_inputs(cases), [checked])
    requests = [call.request for call in calls] + _scorer_requests(inputs, scoring.scorers, samples)
    if repeats is not None:
        requests += [request for _, _, request in repeat_calls(inputs, scoring.rubrics, repeats, seed=0)]
    return estimate_cost(cell.judge, requests)


def calls_per_case(config: BenchmarkConfig, cell: CellSpec, case: EvalCase) -> int:
    """A cell's reader and judge calls on one case (its generated turns included): what a search's plan
    multiplies by the cases each cell may answer."""
    scoring = config.scoring()
    reader = _usage("reader", cell, [case], scoring)["calls"] if cell.reader is not None else 0
    judge = (
        _usage(
            "judge", cell, [case], scoring, config.evaluation.judge_samples, config.evaluation.judge_repeats
        )["calls"]
        if cell.judge
        else 0
    )
    return reader + judge


def plan_rows(
    config: BenchmarkConfig,
    cases: list[EvalCase],
    finished_steps: set[str],
    rerankers: Mapping[str, RerankerChoice] | None = None,
    *,
    cells: list[CellSpec],
) -> list[dict]:
    """One row per cell. `finished_steps`: step ids earlier runs on the same documents and eval cases
    completed; a cell whose steps are all among them will be reused unless the code changed since.
    An answer set shared by several judges is priced once, on the first cell that needs it. `rerankers`:
    the checkpoint each configured reranker would really use, so a cell is named by it (the UNTRAINED
    stand-in says so). `cells`: the config's, expanded once by the caller (`ragbench.config.plan`)."""
    names = llm_names(cells)
    columns = {
        cell.id: cell.axis_columns(names)
        | ({"reranker": rerankers[cell.reranker].label} if rerankers and cell.reranker in rerankers else {})
        for cell in cells
    }
    labels = cell_labels(cells, columns=columns)
    sampled = sample_cases(cases, config.generation.sample_size, config.generation.seed)
    priced: set[str] = set()
    scoring = config.scoring()
    pairwise = config.evaluation.pairwise
    candidates = {key.id for key, _ in pairwise_pairs(cells, pairwise.baseline)} if pairwise else set()
    # an aligned judge's prompts hold the person's examples: its step's earlier runs are no reuse
    aligned = config.evaluation.judge_alignment is not None and config.evaluation.judge_alignment.examples > 0
    rewriter = rewriter_settings(config)
    rows = []
    for cell in cells:
        stages = STAGES[: STAGES.index(cell.last_stage) + 1]
        chunking = [cell.step_id("chunk")] if cell.external is None else []
        new_steps = [
            step
            for step in [*chunking, *row_step_ids(cell)]
            if step not in finished_steps or (aligned and step == cell.step_id("judge"))
        ]
        row: dict = {
            "cell": labels[cell.id],
            "status": "new" if new_steps else "reused",
        }
        usages: list[dict] = []  # each priced stage's `estimate_cost`, summed into the row
        if cell.query_rewrite is not None and rewriter is not None:  # every case is retrieved, so rewritten
            step_id = f"rewrite_{cell.query_rewrite}"  # one rewrite step per mode, on its first cell
            if step_id not in priced and step_id not in finished_steps:
                priced.add(step_id)
                count = config.retrieval.multi_query_count
                usage = estimate_cost(rewriter, rewrite_requests(cell.query_rewrite, cases, count))  # type: ignore[arg-type]
                row["rewrite_calls"] = usage["calls"]
                usages.append(usage)
        for role, stage in (("reader", "answer"), ("judge", "judge"), ("pairwise", "judge")):
            step_id = cell.step_id(stage) if role != "pairwise" else f"pairwise_{cell.upto('judge').id}"
            if role == "pairwise" and cell.upto("answer").id not in candidates:
                continue
            reused = step_id in finished_steps and not (aligned and role == "judge")
            if stage not in stages or step_id in priced or reused:
                continue
            if role == "reader" and cell.external is not None:
                priced.add(step_id)
                # every case, for the retrieval metrics, and each generated turn; cached by version
                row["external_calls"] = len(searched_cases(cases))
                continue
            priced.add(step_id)
            if role == "reader" and (turns := sum(len(case.turn_questions()) for case in sampled)):
                row["generated_turn_calls"] = turns  # extra reader calls, in llm_calls too
                if cell.query_rewrite is not None and rewriter is not None:  # searched again after them
                    again = follow_up_rewrite_requests(
                        cell.query_rewrite,  # type: ignore[arg-type]
                        sampled,
                        config.retrieval.multi_query_count,
                        placeholder_answer(cell.reader.max_tokens if cell.reader else 0),
                    )
                    usage = estimate_cost(rewriter, again)
                    row["follow_up_rewrite_calls"] = usage["calls"]  # in llm_calls too
                    usages.append(usage)
            usages.append(
                _usage(
                    role,
                    cell,
                    sampled,
                    scoring,
                    config.evaluation.judge_samples,
                    config.evaluation.judge_repeats,
                )
            )
        rows.append(row | {"new_steps": len(new_steps)} | _summed(usages))
    return rows


def _summed(usages: list[dict]) -> dict:
    """A row's priced stages (`estimate_cost`'s usages) as its columns: calls and tokens added, the cost
    unknown (None) when any stage's is."""
    costs = [usage["cost_usd"] for usage in usages]
    return {
        "llm_calls": sum(usage["calls"] for usage in usages),
        "prompt_tokens": sum(usage["prompt_tokens"] for usage in usages),
        "completion_tokens_max": sum(usage["completion_tokens"] for usage in usages),
        "cost_usd": None if None in costs else round(sum(costs, 0.0), 4),
    }


def planned_spend(
    rows: list[dict],
    retry_rate: float = 0.0,
    token_share: float | None = None,
    call_share: float | None = None,
) -> PlannedSpend:
    """What a plan's rows (`plan_rows`, `ragbench.config.pipeline_plans`) would send at most, for the
    budget: each row's new LLM calls with their prompt tokens and max_tokens of completion, and an
    external system's calls (one per case; their tokens and cost are the system's own, out of sight).
    `retry_rate`: the retries per call the config's previous run measured; the calls are multiplied by
    (1 + rate), the tokens and cost are not (a failed call is charged none). `token_share`: the share of
    its token bound the previous run used, which makes the bound an expectation (`expected_tokens`);
    `call_share`: the share of its planned first attempts it sent (a race stops cells early, the LLM cache
    serves a repeated prompt within the run), which does the same for the calls (`expected_calls`, its
    retries included). The bound stays what the budget is checked against: the cap must hold either way."""
    costs = [row["cost_usd"] for row in rows]
    first = sum(row.get("llm_calls", row.get("calls", 0)) + row.get("external_calls", 0) for row in rows)
    tokens = sum(
        row.get("prompt_tokens", 0) + row.get("completion_tokens_max", row.get("completion_tokens", 0))
        for row in rows
    )
    return PlannedSpend(
        calls=round(first * (1 + retry_rate)),
        retry_rate=retry_rate,
        tokens=tokens,
        expected_tokens=None if token_share is None else round(tokens * token_share),
        expected_calls=None if call_share is None else round(first * call_share * (1 + retry_rate)),
        cost_usd=None if None in costs else sum(costs),
    )


def rerank_work(
    config: BenchmarkConfig,
    cases: list[EvalCase],
    finished_steps: set[str],
    *,
    cells: list[CellSpec],
) -> str | None:
    """The rerank stage's work, or None when no cell reranks: its steps (one per retrieve key and reranker,
    each reranking every case's top_k candidates, read by every answer key after it) and the ColBERT
    encodings they read (one per checkpoint and chunk set), new or done by an earlier run."""
    keys = distinct_at(cells, "rerank")
    if not keys:
        return None
    numbers = reranker_numbers(cells)
    encodings = {key.encodings_step_id(numbers[key.reranker]) for key in keys if key.reranker is not None}
    new = sum(key.step_id("rerank") not in finished_steps for key in keys)
    new_encodings = len(encodings - finished_steps)
    return (
        f"Rerank stage: {len(keys)} step(s), {new} new, each reranking the top_k candidates of all "
        f"{len(cases)} cases (no LLM call; a query encoding and a MaxSim per case), from {len(encodings)} "
        f"set(s) of ColBERT chunk encodings, {new_encodings} new (each encodes a whole chunk set once)."
    )


def _judge_card(
    config: BenchmarkConfig, cases: list[EvalCase], cells: list[CellSpec]
) -> tuple[int, int, int] | None:
    """The judge card's calls at most per judge (one per planted error type and the unchanged reference of
    each sampled case), its judges and its sampled cases; None without a judge card."""
    check = config.evaluation.judge_check
    judges = {key.judge.result_key for key in distinct_at(cells, "judge") if key.judge}
    if check is None or not judges:
        return None
    sampled = min(check.cases, sum(case.reference_answer is not None for case in cases))
    return sampled * (1 + len(PLANTED_KINDS)), len(judges), sampled


def judge_card_calls(config: BenchmarkConfig, cases: list[EvalCase], *, cells: list[CellSpec]) -> str | None:
    """The judge card's line of the dry run, or None without a judge card."""
    if (card := _judge_card(config, cases, cells)) is None:
        return None
    calls, judges, sampled = card
    return (
        f"Judge card: at most {calls} calls for each of {judges} judge(s), on {sampled} sampled cases "
        "(cached: a later run on the same cases pays nothing)."
    )


def _written_references(cases: list[EvalCase]) -> int:
    """Cases whose reference the reader writes from fetched context at run time: a call each, at most."""
    return sum(case.reference_from is not None and case.reference_from.gives == "context" for case in cases)


def calls_beside_the_rows(config: BenchmarkConfig, cases: list[EvalCase], *, cells: list[CellSpec]) -> int:
    """The calls a run may send that its rows do not count, at most: the judge card's and the references
    written from context. The budget check adds them to the calls (their tokens are not estimated); a judge
    alignment's depend on the labels the run reads, and are not counted."""
    card = _judge_card(config, cases, cells)
    return (card[0] * card[1] if card is not None else 0) + _written_references(cases)


def judge_alignment_calls(config: BenchmarkConfig, *, cells: list[CellSpec]) -> str | None:
    """What aligning the judges adds, or None without `evaluation.judge_alignment`."""
    alignment = config.evaluation.judge_alignment
    judges = {key.judge.result_key for key in distinct_at(cells, "judge") if key.judge}
    if alignment is None or not judges:
        return None
    sides = (
        "as it is and aligned (the aligned calls are the grid judge's own"
        if alignment.examples
        else "as it is ("
    )
    return (
        f"Judge alignment ({alignment.labels}): each of {len(judges)} judge(s) also grades every labelled "
        f"answer {sides}; calls of answers an earlier run judged are cached). Labels are read by the run, "
        "not counted here."
    )


def reference_calls(config: BenchmarkConfig, cases: list[EvalCase], *, cells: list[CellSpec]) -> str | None:
    """What fetching references at run time adds, or None when no case fetches one."""
    fetched = [case for case in cases if case.reference_from or case.expected_sources_from]
    if not fetched:
        return None
    written = _written_references(fetched)
    readers = [cell.reader.model for cell in cells if cell.reader is not None]
    writer = (
        f" and up to {written} call(s) of {readers[0]} writing a reference from context" if written else ""
    )
    return (
        f"References: {len(fetched)} case(s) fetch theirs when the run starts (not fetched here){writer}; "
        "their judge calls are counted above as if the reference were stored."
    )


def label_correction_line(config: BenchmarkConfig) -> str | None:
    """What correcting the judged metrics with labels adds (no call), or None without it."""
    correction = config.evaluation.label_correction
    if correction is None:
        return None
    return (
        f"Label correction ({correction.labels}): every judged metric with labels drawn on the review page's "
        "sample orders gets a prediction-powered estimate, and the verdicts and the gate use it (no LLM "
        f"call; fewer than {correction.min_labels} labels per cell give no interval). Labels are read by the "
        "run."
    )


def detection_lines(
    config: BenchmarkConfig,
    cases: list[EvalCase],
    previous: tuple[str, ResultsTable] | None,
    *,
    cells: list[CellSpec],
) -> list[str]:
    """What the run can decide, per headline metric: the smallest difference between cells its sample
    detects and, with `statistics.detect`, whether it detects that one and how many cases it needs
    (`ragbench.analysis.planning`), planned from the per-case differences of the top two cells of the
    config's latest run (`previous`: its name and results table; a pilot of a few cases serves). The sample
    is the run's: every case with expected sources for retrieval metrics, the sampled cases for the others
    (a metric scored only where its fields are present may get fewer); the comparisons are every other
    cell against the best, at Holm's strictest level. With label correction, the labels too (`_labels_text`).
    Nothing with one cell (no comparison)."""
    if len(cells) < 2:
        return []
    if previous is None:
        return [
            f"What the run can decide: no earlier run of config {config.name} to plan from; a pilot of a few "
            "cases (--set generation.sample_size=10) gives the spread the next dry run plans with."
        ]
    name, table = previous
    settings = config.statistics
    comparisons = len(cells) - 1
    sampled = len(sample_cases(cases, config.generation.sample_size, config.generation.seed))
    with_sources = sum(
        bool(case.expected_sources) or case.expected_sources_from is not None for case in cases
    )
    lines = [
        f"What the run can decide, per headline metric (planned from the top two cells of run {name}; "
        f"{comparisons} comparison(s) with the best, Holm-corrected):"
    ]
    for verdict in table.verdicts:
        if (other := verdict.pilot_cell) is None:
            lines.append(
                f"  {verdict.label}: its cells scored the same on every case there: no spread to plan from"
            )
            continue
        values = {
            cell: table.case_values.get(cell, {}).get(verdict.column, {}) for cell in (verdict.best, other)
        }
        differences, binary = top_two_differences(values, verdict.best, other)
        planned = plan(
            differences,
            with_sources if is_retrieval_column(verdict.column) else sampled,
            PlannedTest.of(settings, comparisons, binary=binary),
            detect=settings.detect,
        )
        labels = _labels_text(config, table, verdict, other, sampled, comparisons)
        lines.append(f"  {verdict.label}: {planned.text()}{labels}")
    if len(lines) == 1:
        lines.append(f"  run {name} compared no cells: nothing to plan from")
    return lines


def _labels_text(
    config: BenchmarkConfig,
    table: ResultsTable,
    verdict: MetricVerdict,
    other: str,
    answers: int,
    comparisons: int,
) -> str:
    """`; with labels, about 40 labelled cases (a simple random sample) detect it`: the labels the named
    difference needs when the run corrects this metric with labels, planned from the earlier run's labelled
    top two (`planning.labels_needed`); empty without `statistics.detect`, label correction or such labels."""
    correction, detect = config.evaluation.label_correction, config.statistics.detect
    if correction is None or detect is None or table.label_correction is None:
        return ""
    if (corrected := table.label_correction.of(verdict.column)) is None:
        return ""
    if corrected.weighted:
        return "; labels for it are not planned for a weighted (uncertainty-first) sample"
    judge_values = {
        cell: table.case_values.get(cell, {}).get(verdict.column, {}) for cell in (verdict.best, other)
    }
    _, judge, person = paired_labels(corrected, judge_values, verdict.best, other)
    needed = labels_needed(
        judge,
        person,
        answers=answers,
        difference=detect,
        alpha=config.statistics.alpha,
        power=config.statistics.power,
        comparisons=comparisons,
        min_labels=correction.min_labels,
    )
    if needed is None:
        return "; with labels, not even labelling every sampled case detects it"
    return f"; with labels, about {needed} labelled cases (a simple random sample) detect it"
