"""What reusing the previous prompt's evaluated prefix saves the local judge, and whether its replies stay
those of a fresh evaluation.

The judge card's planted answers (`ragbench.analysis.judge_card.planted_inputs`) of a seeded sample of the
default config's eval cases, graded with the correctness rubric by a local GGUF model (the 1.5B judge; the
0.5B in --smoke, a third of the prompt evaluation) one after the other, as the card asks them, three ways:
- fresh: the model state cleared before every call (every prompt evaluated from its first token);
- blocks: ragbench's evaluation (`ragbench.llm.local`): whole 64-token blocks of the previous prompt reused,
  every block evaluated at fixed positions; once in the card's order and once in reverse;
- unaligned: llama-cpp-python's own reuse, from wherever the previous prompt stops matching.
It prints each way's wall time, its speed-up over fresh, and how many replies are identical to fresh's.
No LLM cache: every call is made.

    python bench/bench_local_prefix.py [--cases 2] [--max-tokens 300] [--model NAME] [--smoke]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from ragbench.analysis.judge_card import planted_inputs, sample_cases  # noqa: E402
from ragbench.config.model import load_config  # noqa: E402
from ragbench.inputs.eval_cases import load_eval_cases  # noqa: E402
from ragbench.inputs.knowledge_base import load_corpus  # noqa: E402
from ragbench.llm import local  # noqa: E402
from ragbench.report.pages import rows_to_text  # noqa: E402
from ragbench.scoring.planted import UNCHANGED, knowledge_vocabulary  # noqa: E402
from ragbench.scoring.rubrics import BUILTIN_RUBRICS  # noqa: E402

JUDGE_MODEL = "qwen2.5-coder-1.5b-instruct"
SMOKE_MODEL = "qwen2.5-coder-0.5b-instruct"  # the same code path at a third of the 1.5B's prompt evaluation
RUBRIC = BUILTIN_RUBRICS["correctness"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2, help="eval cases sampled, as judge_check.cases")
    parser.add_argument("--max-tokens", type=int, default=300, help="the judge's max_tokens")
    parser.add_argument("--model", default=None, help=f"a packaged GGUF model; default {JUDGE_MODEL}")
    parser.add_argument(
        "--smoke", action="store_true", help=f"1 case, 2 planted answers, short replies, {SMOKE_MODEL}"
    )
    args = parser.parse_args()
    if args.smoke:
        args.cases, args.max_tokens = 1, 12
    model_name = args.model or (SMOKE_MODEL if args.smoke else JUDGE_MODEL)
    config = load_config(ROOT / "configs" / "default.yaml")
    documents = [document.text for document in load_corpus(config.knowledge_base).documents]
    cases = sample_cases(load_eval_cases(config.eval_cases.path), args.cases, seed=0)
    planted = [
        entry
        for entry in planted_inputs(cases, knowledge_vocabulary(documents), seed=0)
        if entry.kind == UNCHANGED or entry.kind in RUBRIC.judge_check_kinds
    ][: 2 if args.smoke else None]
    params = {
        "temperature": 0.0,
        "max_tokens": args.max_tokens,
        "response_format": {"type": "json_object", "schema": RUBRIC.reply_schema.model_json_schema()},
    }
    model = local.get_local_model(model_name)
    blocks_eval = model.llama.eval
    unaligned_eval = type(model.llama).eval.__get__(model.llama)  # llama-cpp-python's own

    def grade(order: list, *, fresh: bool = False) -> tuple[float, dict[tuple[str, str], str]]:
        replies, start = {}, time.perf_counter()
        for item, kind, _ in order:
            if fresh:
                model.llama.reset()
            reply = local.run_local_chat(model_name, RUBRIC.messages(item), params)
            replies[item.case_id, kind] = reply["choices"][0]["message"]["content"]
        return time.perf_counter() - start, replies

    if not args.smoke:
        grade(planted[:1], fresh=True)  # load and warm the model outside the timings
    fresh_s, fresh = grade(planted, fresh=True)
    rows = [{"way": "fresh", "seconds": round(fresh_s, 1), "speedup": 1.0, "identical": len(fresh)}]
    ways = [("blocks", planted, blocks_eval), ("blocks-reversed", planted[::-1], blocks_eval)]
    for way, order, evaluate in [*ways, ("unaligned", planted, unaligned_eval)]:
        model.llama.eval = evaluate
        try:
            model.llama.reset()
            seconds, replies = grade(order)
        finally:
            model.llama.eval = blocks_eval
        same = sum(replies[key] == reply for key, reply in fresh.items())
        rows.append(
            {
                "way": way,
                "seconds": round(seconds, 1),
                "speedup": round(fresh_s / seconds, 2),
                "identical": same,
            }
        )
    shown = f"{len(planted)} planted answers of {args.cases} case(s), max_tokens {args.max_tokens}"
    print(f"{shown}, {model_name}")
    print(rows_to_text(rows), end="\n\n")
    blocks_same = min(row["identical"] for row in rows if row["way"].startswith("blocks"))
    print(f"block reuse: {rows[1]['speedup']}x, replies identical to fresh: {blocks_same}/{len(planted)}")
    return 0 if blocks_same == len(planted) else 1


if __name__ == "__main__":
    raise SystemExit(main())
