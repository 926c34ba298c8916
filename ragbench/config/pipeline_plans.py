"""The dry runs of the pipelines that make an eval set or train a reranker: the calls, tokens and cost each
would send at most (`run.py testset --dry-run`, `run.py train-reranker --dry-run`), and what their budget
is checked against. The benchmark's own plan is `ragbench.config.dry_run`."""

from __future__ import annotations

from ragbench.config.model import BenchmarkConfig
from ragbench.inputs.chunking import Chunk
from ragbench.inputs.conversation import Turn
from ragbench.inputs.eval_cases import SourceChunk
from ragbench.llm.pricing import estimate_cost
from ragbench.llm.types import LLMRequest
from ragbench.testset.critique import critic_request
from ragbench.testset.generate import Candidate, CandidateSet, evolve_request, first_request
from ragbench.testset.plan import Seed, assign_kinds
from ragbench.testset.roundtrip import equivalence_request, max_equivalence_calls, roundtrip_requests
from ragbench.testset.rubrics import EVOLUTIONS, UNANSWERABLE, critics_for, is_follow_up
from ragbench.training.questions import question_request


def testset_plan_rows(config: BenchmarkConfig, available_chunks: int) -> list[dict]:
    """`run.py testset --dry-run`: the calls, tokens and cost generating the eval set takes at most, one
    row per kind of call: the generator's, then those of each configured filter (`filter` names it; the
    critic model makes them all):

    - roundtrip reads: the critic answers each question as a reader, from its source passage(s) and from
      a search of the whole knowledge base (an unanswerable question from the search only; a follow-up
      from its source after its conversation, and from the search without it);
    - roundtrip equivalence: asked only where word overlap cannot decide whether a read agrees with a
      long proposed answer, so counted as if every answerable case had a long answer and neither read
      were decided (two per answerable case);
    - critics: every critic that applies rates every case (a follow-up with its conversation shown).

    Every candidate counts as generated (`questions_per_chunk` per sampled chunk); passages are as long
    as the chunk size allows and completions `max_tokens` long."""
    settings = config.testset
    size, _ = config.section_chunking(config.testset)
    kinds = assign_kinds(
        min(settings.chunks, available_chunks),
        settings.evolutions,
        settings.unanswerable_share,
        settings.seed,
    )
    critic_settings = settings.critic_settings()
    passage = SourceChunk(source="doc", start_index=0, text=" ".join(["token"] * size))
    question = " ".join(["word"] * 20)
    # long enough that every check may need the equivalence question; the reader's answer at its longest
    answer = " ".join(["word"] * max(40, settings.roundtrip_short_answer_tokens + 1))
    reader_answer = " ".join(["word"] * critic_settings.max_tokens)
    retrieved = [passage] * settings.retrieved_passages
    requests: dict[str, list[LLMRequest]] = {"generator": [], "reads": [], "equivalence": [], "critics": []}
    for kind in kinds:
        evolution = EVOLUTIONS.get(kind)
        seed = Seed(id=kind, evolution=kind, chunks=[passage] * (evolution.passages if evolution else 1))
        # a follow-up's reads and critiques carry its conversation: the plain question and its answer
        history = (
            [Turn(role="user", content=question), Turn(role="assistant", content=answer)]
            if evolution is not None and evolution.follow_up
            else []
        )
        requests["generator"].append(first_request(seed, settings.audience, settings.questions_per_chunk))
        if evolution is not None:
            evolve = evolve_request(seed, question, answer, settings.audience)
            requests["generator"] += [evolve] * settings.questions_per_chunk
        candidates = CandidateSet(
            generator="",
            candidates=[
                Candidate(
                    id=f"{kind}-{n}",
                    evolution=kind,
                    chunks=seed.chunks,
                    history=history,
                    question=question,
                    answer=answer,
                )
                for n in range(settings.questions_per_chunk)
            ],
        )
        if "roundtrip" in settings.filters:
            searched = {candidate.id: retrieved for candidate in candidates.candidates}
            requests["reads"] += [read.request for read in roundtrip_requests(candidates, searched)]
            equivalence = equivalence_request(question, answer, reader_answer)
            requests["equivalence"] += [equivalence] * max_equivalence_calls(
                candidates, settings.roundtrip_short_answer_tokens
            )
        if "critics" in settings.filters:
            requests["critics"] += [
                critic_request(critic, candidate, retrieved, settings.audience)
                for candidate in candidates.candidates
                for critic in critics_for(kind)
            ]
    counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
    per_chunk = settings.questions_per_chunk
    answerable = per_chunk * sum(n for kind, n in counts.items() if kind != UNANSWERABLE)
    unanswerable = per_chunk * counts.get(UNANSWERABLE, 0)
    follow_ups = per_chunk * sum(n for kind, n in counts.items() if is_follow_up(kind))
    kinds_text = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    rows = [
        {
            "role": "generator",
            "filter": "",
            "calls_for": f"questions of {len(kinds)} chunks ({kinds_text}), then their evolutions",
        }
        | estimate_cost(settings.generator_settings(), requests["generator"]),
    ]
    if "roundtrip" in settings.filters:
        rows += [
            {
                "role": "roundtrip reads",
                "filter": "roundtrip",
                "calls_for": f"source + whole-KB search of {answerable} answerable cases"
                + (f" ({follow_ups} follow-ups: searched without their conversation)" if follow_ups else "")
                + f", search of {unanswerable} unanswerable",
            }
            | estimate_cost(critic_settings, requests["reads"]),
            {
                "role": "roundtrip equivalence",
                "filter": "roundtrip",
                "calls_for": f"at most 2 per answerable case ({answerable}), when a long answer is undecided",
            }
            | estimate_cost(critic_settings, requests["equivalence"]),
        ]
    if "critics" in settings.filters:
        critics = dict.fromkeys(critic.name for kind in counts for critic in critics_for(kind))
        rows.append(
            {
                "role": "critics",
                "filter": "critics",
                "calls_for": f"{', '.join(critics)} of {answerable + unanswerable} cases, as they apply",
            }
            | estimate_cost(critic_settings, requests["critics"])
        )
    return rows


def training_plan_rows(config: BenchmarkConfig) -> list[dict]:
    """`run.py train-reranker`'s calls at most: one generator question per sampled chunk (none when it
    writes no questions), each chunk as long as the chunk size allows, completions `max_tokens` long."""
    training = config.reranker_training
    size, _ = config.section_chunking(training)
    chunk = Chunk(text=" ".join(["token"] * size), source="doc", start_index=0)
    request = question_request(chunk, training.audience)
    return [
        {"role": "question writer", "calls_for": f"one question for each of {training.chunks} chunk(s)"}
        | estimate_cost(training.generator_settings(), [request] * training.chunks)
    ]
