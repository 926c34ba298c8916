"""Judge repeats (`evaluation.judge_repeats`): a seeded sample of a cell's judged answers asked again,
`count` times each, to measure how repeatable the judge's verdicts are.

Some repeats send the very same prompt again (what a hosted model's sampling or a provider's
nondeterminism can change); the others (`reorder_share` of them) show the passages and the rubric's
options (its "5 = ...", "pass = ..." lines) in another, seeded order, which a judge that reads position
rather than content answers differently. Each repeat's index and orders are part of its LLM cache key
(`LLMRequest.repeat`), so an identical repeat is asked again, never served the first verdict from cache;
at temperature 0 a local judge's identical repeats will still agree, since greedy decoding is
deterministic. The statistics are in `ragbench.analysis.judge_repeats`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field

from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMRequest
from ragbench.scoring.rubrics import DEFAULT_CONTEXT_CHAR_BUDGET, JudgeInput, Rubric
from ragbench.section import Section

# One option of a rubric's scale as the prompt lists it: "5 = correct: ..." or "pass = ...".
_OPTION_LINE = re.compile(r"^(?:[1-5]|pass|fail) = ", re.MULTILINE)


class JudgeRepeatsConfig(Section):
    """`evaluation.judge_repeats`: how many judged answers are asked again, and how."""

    count: int = Field(ge=2, le=20, description="repeats of each sampled verdict (at least 2)")
    sample: int = Field(
        ge=1, le=10_000, description="judged answers per cell to repeat (seeded; all when fewer)"
    )
    reorder_share: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="share of the repeats that show the passages and the rubric's options in another "
        "seeded order (the rest repeat the prompt as it was)",
    )


@dataclass(frozen=True)
class Repeat:
    """One repeat of one answer's verdict: its index (1..count) and, when reordered, the orders shown
    (`passages[i]` is the original position of the passage shown i-th; likewise `options`)."""

    case_id: str
    index: int
    passages: tuple[int, ...] | None = None
    options: tuple[int, ...] | None = None

    @property
    def reordered(self) -> bool:
        return self.passages is not None or self.options is not None

    def key(self) -> dict[str, object]:
        """What goes into the cache key and is recorded with the verdict."""
        return {"index": self.index, "passages": self.passages, "options": self.options}


def _permutation(rng: random.Random, size: int) -> tuple[int, ...]:
    """A seeded order of `size` items that differs from the original whenever it can."""
    order = list(range(size))
    if size < 2:
        return tuple(order)
    while order == sorted(order):
        rng.shuffle(order)
    return tuple(order)


def plan_repeats(
    inputs: Sequence[JudgeInput], rubric: Rubric, config: JudgeRepeatsConfig, seed: int
) -> list[Repeat]:
    """The repeats of one rubric over one cell's answers: `config.sample` of the answers the rubric grades
    (seeded, so a re-run repeats the same ones and hits the cache), each `count` times, a seeded
    `reorder_share` of its repeats reordered: the passages if the rubric shows them (and there are two or
    more), the options if its prompt lists them one a line."""
    graded = [item for item in inputs if rubric.applies(item)]
    rng = random.Random(f"{seed}:{rubric.name}")
    chosen = rng.sample(graded, min(config.sample, len(graded)))
    options = len(_OPTION_LINE.findall(rubric.system))
    reordered = round(config.count * config.reorder_share)
    repeats = []
    for item in sorted(chosen, key=lambda i: i.case_id):
        which = set(rng.sample(range(1, config.count + 1), reordered))
        for index in range(1, config.count + 1):
            passages = len(item.contexts) if "passages" in rubric.inputs else 0
            if index in which and (passages > 1 or options > 1):
                repeats.append(
                    Repeat(
                        item.case_id,
                        index,
                        _permutation(rng, passages) if passages > 1 else None,
                        _permutation(rng, options) if options > 1 else None,
                    )
                )
            else:  # nothing this rubric shows can be reordered: the repeat is an identical one
                repeats.append(Repeat(item.case_id, index))
    return repeats


def reorder_options(text: str, order: Sequence[int]) -> str:
    """`text` with its run of option lines (`_OPTION_LINE`) listed in `order`; unchanged without one."""
    lines = text.split("\n")
    at = [i for i, line in enumerate(lines) if _OPTION_LINE.match(line)]
    if len(at) != len(order) or len(at) < 2:
        return text
    shown = [lines[at[position]] for position in order]
    for slot, line in zip(at, shown, strict=True):
        lines[slot] = line
    return "\n".join(lines)


def repeat_request(
    rubric: Rubric,
    item: JudgeInput,
    repeat: Repeat,
    context_char_budget: int | None = DEFAULT_CONTEXT_CHAR_BUDGET,
) -> LLMRequest:
    """The call a repeat makes: the rubric's prompt for `item`, reordered as `repeat` says."""
    if repeat.passages is not None:
        item = item.model_copy(update={"contexts": [item.contexts[i] for i in repeat.passages]})
    messages = rubric.messages(item, context_char_budget=context_char_budget)
    if repeat.options is not None:
        messages = [
            m | {"content": reorder_options(m["content"], repeat.options)} if m["role"] == "system" else m
            for m in messages
        ]
    return LLMRequest(messages, response_schema=rubric.reply_schema, repeat=repeat.key())


@dataclass(frozen=True)
class RepeatedVerdict:
    """A repeat's outcome: the criteria's scores (pass/fail as 1/0), empty when the call failed."""

    rubric: str
    repeat: Repeat
    scores: dict[str, int]
    error: str | None = None


def repeat_calls(
    inputs: Sequence[JudgeInput],
    rubrics: Sequence[Rubric],
    config: JudgeRepeatsConfig,
    seed: int,
    context_char_budget: int | None = DEFAULT_CONTEXT_CHAR_BUDGET,
) -> list[tuple[Rubric, Repeat, LLMRequest]]:
    """Every repeat call of one cell, without making any: what the run sends and the dry run prices."""
    by_id = {item.case_id: item for item in inputs}
    return [
        (rubric, repeat, repeat_request(rubric, by_id[repeat.case_id], repeat, context_char_budget))
        for rubric in rubrics
        for repeat in plan_repeats(inputs, rubric, config, seed)
    ]


def judge_repeats(
    client: LLMClient,
    inputs: Sequence[JudgeInput],
    rubrics: Sequence[Rubric],
    config: JudgeRepeatsConfig,
    seed: int,
    context_char_budget: int | None = DEFAULT_CONTEXT_CHAR_BUDGET,
) -> list[RepeatedVerdict]:
    """Ask every planned repeat of one cell (cached, retried and capped by the budget like any call)."""
    calls = repeat_calls(inputs, rubrics, config, seed, context_char_budget)
    results = client.complete_many([request for _, _, request in calls], desc="judge repeats")
    return [
        RepeatedVerdict(rubric.name, repeat, rubric.scores(result.parsed))
        if result.error is None and result.parsed is not None
        else RepeatedVerdict(rubric.name, repeat, {}, result.error or "no reply")
        for (rubric, repeat, _), result in zip(calls, results, strict=True)
    ]
