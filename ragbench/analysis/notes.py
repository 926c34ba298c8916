"""What a run's numbers rest on and what should change how they are read, worded for the run: the eval set,
the cases behind each part, external systems, retried calls, stand-ins and truncated chunks."""

from __future__ import annotations

from ragbench.analysis.results import CellResults
from ragbench.generation.answers import ExternalAnswers
from ragbench.inputs.eval_cases import EvalSuite, name_cases
from ragbench.inputs.traces import TraceReading
from ragbench.retrieval.rerank import RerankerChoice
from ragbench.scoring.judge import judge_warnings


def run_notes(
    results: CellResults,
    sample_size: int | None,
    seed: int,
    eval_suite: EvalSuite | None = None,
    raced: bool = False,
    searched: bool = False,
) -> list[str]:
    """What the numbers rest on, worded for this run (a retrieval-only run has no answers to describe),
    first which eval set it used; `raced`: the cells raced, each answered as many cases as it lasted;
    `searched`: a model-based search tried some cells, each on as many cases as its trial lasted."""
    notes = []
    if eval_suite is not None:
        notes.append(
            f"Eval set: {eval_suite.label or 'unnamed'} ({len(eval_suite.cases)} cases, "
            f"fingerprint {eval_suite.fingerprint or 'none'})."
        )
        if eval_suite.traces is not None:
            notes.append(eval_suite.traces.summary() + skipped_traces(eval_suite.traces))
    retrieval_cases = {r.retrieval.metrics.cases_used for r in results.retrievals.values()}
    notes.append(
        f"Retrieval metrics use every case with expected sources ({', '.join(map(str, retrieval_cases))})."
    )
    if results.reranks:
        notes.append(
            "Reranking cells rerank every case's top_k candidates before the reader takes its top_n: their "
            "retrieval columns without a prefix measure that reranked ranking, the passages the reader is "
            "given; first_stage_* columns measure the ranking before reranking (equal in cells without a "
            "reranker; an external system's cell has only the sources it returned). hit_rate@top_n: an "
            "expected source among the reader's top_n passages."
        )
    if results.answer_sets and searched:
        notes.append(
            f"A model-based search tried some of the cells: each tried cell answered the first cases of one "
            f"seeded order (seed {seed}) until its trial was pruned or done, the finalists also the held-out "
            "cases (the search's section); each *_cases column gives the number of cases behind its "
            "metric, and a cell not tried has retrieval metrics only."
        )
    elif results.answer_sets and raced:
        notes.append(
            f"The cells raced: each answered the first cases of one seeded order (seed {seed}) until it "
            "stopped or the race ended (the race's section); each *_cases column gives the number of cases "
            "behind its metric, and a stopped cell's scores rest on its own, smaller n."
        )
    elif results.answer_sets:
        case_ids = [answer.case_id for answer in next(iter(results.answer_sets.values())).answers]
        answered = len(case_ids)
        chosen = (
            "every case" if sample_size is None else f"the first {answered} of a seeded order (seed {seed})"
        )
        notes.append(
            f"Answers, keyword tests and the judge use {answered} cases ({name_cases(case_ids)}), "
            f"{chosen}, the same in every cell; "
            "each *_cases column gives the number of cases behind its metric."
        )
    notes += [external_note(s.external) for s in results.answer_sets.values() if s.external is not None]
    reader_retried = sum(a.retried_earlier_failure for s in results.answer_sets.values() for a in s.answers)
    judge_retried = sum(j.calls_retried for j in results.judgements())
    if reader_retried or judge_retried:
        notes.append(
            f"This run made again {reader_retried} answering call(s) (reader or external system) and "
            f"{judge_retried} judge call(s) that had "
            "failed in an earlier run (steps with failed calls are never reused from the cache; their "
            "finished calls came from the LLM cache)."
        )
    return notes


def skipped_traces(reading: TraceReading, shown: int = 10) -> str:
    """The skipped traces by id with their reasons (the first `shown`; the eval suite artifact lists all)."""
    if not reading.skipped:
        return ""
    listed = "; ".join(f"{s.trace_id or 'no trace id'}: {s.reason}" for s in reading.skipped[:shown])
    more = (
        f" and {len(reading.skipped) - shown} more (in the eval suite artifact)"
        if len(reading.skipped) > shown
        else ""
    )
    return f" Skipped: {listed}{more}."


def external_note(external: ExternalAnswers) -> str:
    """Which deploy of an external system answered, how its calls went, and what could not be measured."""
    version = f", version {external.version}" if external.version else ""
    if external.kind == "traces":
        return (
            f"Logged system {external.name}: the answers and retrieved documents of {external.cases_asked} "
            "traces, scored as logged (the system was not asked again); retrieval metrics only where a case "
            "has expected_sources."
        )
    text = (
        f"External system {external.name} ({external.kind} {external.endpoint}{version}): asked "
        f"{external.cases_asked} cases, {external.calls_made} not from the cache, {external.failures} failed "
        f"({external.retries} retries)."
    )
    if not external.returned_contexts:
        return text + (
            " It returned no passages: its row has answer-only metrics (no retrieval metrics, no rubric that "
            "reads passages)."
        )
    if external.retrieval is None:
        return text + " Its passages came without sources: no retrieval metrics."
    return text + " Retrieval metrics compare the sources it returned, in its order, with expected_sources."


def run_warnings(results: CellResults, skipped_documents: list[str]) -> list[str]:
    """Everything that should change how the numbers are read, found in the results themselves."""
    warnings = [f"knowledge base: skipped {reason}" for reason in skipped_documents]
    for choice in {r.reranker.used: r.reranker for r in results.reranks.values()}.values():
        if choice.trained_label:
            warnings.append(trained_reranker_note(choice, results))
        if choice.is_standin:
            warnings.append(
                f"RERANKER IS AN UNTRAINED STAND-IN ({choice.label}) for {choice.requested}: "
                f"{choice.reason}. Rows with this reranker show that the reranking path works; their numbers "
                "are NOT ColBERT results."
            )
    for result in results.retrievals.values():
        if result.index is not None and result.index.chunks_over_max_length:
            warnings.append(
                f"{result.index.chunks_over_max_length} chunks of size {result.index.chunk_size} exceed "
                f"{result.index.embedding_model}'s maximum sequence length and were truncated when embedded"
            )
        if (rewrite := result.rewrite) is not None and rewrite.failures:
            warnings.append(
                f"query rewrite {rewrite.mode} by {rewrite.model} failed for {rewrite.failures} of "
                f"{rewrite.calls} case(s): those were searched as asked in every {rewrite.mode} cell, whose "
                "retrieval metrics understate the rewrite (the next run asks again)"
            )
    rubrics = {rubric.name: rubric for result in results.judged.values() for rubric in result.rubrics}
    return list(dict.fromkeys(warnings)) + judge_warnings(results.judgements(), rubrics.values())


def trained_reranker_note(choice: RerankerChoice, results: CellResults) -> str:
    """What a locally trained reranker is (never colbertv2.0) and whether this run's cases were held out of
    its training: a case that was not could have leaked into it, and is named. Its cases are those its
    retrieval metrics were computed on and those answered from its ranking."""
    asked = {c.case_id for r in results.reranks.values() if r.reranker == choice for c in r.retrieval.cases}
    asked |= {a.case_id for s in results.answer_sets.values() if s.reranker == choice for a in s.answers}
    leaked = sorted(asked - set(choice.held_out_cases))
    text = (
        f"RERANKER {choice.used} is {choice.trained_label} ({choice.reason}), not colbert-ir/colbertv2.0; "
        f"{len(asked) - len(leaked)} of this run's {len(asked)} reranked case(s) were held out of training"
    )
    if leaked:
        return f"{text}. NOT held out (it was trained beside another eval set): {', '.join(leaked)}"
    return text + "."
