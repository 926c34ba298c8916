"""Does a judge read faithfulness better statement by statement (Ragas's faithfulness) or as one holistic
1-5 score (the context rubric)? Both are checked against a person's labels of the same answers.

`tests/data/faithfulness_labels.jsonl` holds answers the default reader gave on the default knowledge base,
the passages it saw, the statements the local 1.5B judge extracted from each answer, and a person's label of
every statement (1: the passages support it). The judge under test (default: the local 1.5B) then
- judges every labelled statement against the passages (the faithfulness scorer's verdict call): how often
  its verdict agrees with the label;
- gives the holistic faithfulness score (the context rubric): how often "score >= 4" agrees with "every
  statement is supported" by the labels, against how often the statement verdicts' answer-level reading
  ("every verdict is 1") does.
The calls go through the LLM cache, so a rerun costs nothing.

`--smoke` runs the fake OpenAI server as the judge on the first answers (for tests).

    python bench/bench_statement_judge.py [--judge local/qwen2.5-coder-1.5b-instruct] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from ragbench.inputs.tables import jsonl_records  # noqa: E402
from ragbench.llm.client import LLMClient  # noqa: E402
from ragbench.llm.types import LLMRequest, LLMSettings  # noqa: E402
from ragbench.scoring import ragas_prompts as prompts  # noqa: E402
from ragbench.scoring.rubrics import BUILTIN_RUBRICS, JudgeInput  # noqa: E402
from ragbench.stats.formatting import interval_text  # noqa: E402
from ragbench.stats.inference import wilson_interval  # noqa: E402
from tests.fake_openai_server import FakeOpenAIServer  # noqa: E402

LABELS = ROOT / "tests" / "data" / "faithfulness_labels.jsonl"
CONTEXT = BUILTIN_RUBRICS["context"]


def share(agree: int, n: int) -> str:
    if n == 0:
        return "0/0 (nothing scored)"
    low, high = wilson_interval(agree, n) or (0.0, 0.0)
    return f"{agree}/{n} ({agree / n:.0%}, 95% CI {interval_text(low, high, digits=0, percent_range=True)})"


def measure(client: LLMClient, answers: list[dict]) -> None:
    """Ask the judge and print the agreements."""
    requests = []
    for item in answers:
        statements = [s["statement"] for s in item["statements"]]
        requests.append(
            LLMRequest(prompts.verdicts_messages(item["passages"], statements), prompts.StatementVerdicts)
        )
        judged = JudgeInput(
            case_id=item["case_id"],
            question=item["question"],
            answer=item["answer"],
            contexts=item["passages"],
        )
        requests.append(LLMRequest(CONTEXT.messages(judged), response_schema=CONTEXT.reply_schema))
    results = client.complete_many(requests, desc="judge")
    statement_agree = statements_n = holistic_agree = decomposed_agree = failed = 0
    caught = unsupported = 0  # statements labelled unsupported, and how many of them the judge rejected
    for item, verdicts, holistic in zip(answers, results[::2], results[1::2], strict=True):
        labels = [s["supported"] for s in item["statements"]]
        faithful = all(labels)
        if verdicts.parsed is None or holistic.parsed is None:
            failed += 1
            continue
        given = [v["verdict"] for v in verdicts.parsed["statements"]]
        # a verdict the judge left out (or one too many) counts as a disagreement
        statement_agree += sum(a == b for a, b in zip(given, labels, strict=False))
        statements_n += len(labels)
        unsupported += labels.count(0)
        caught += sum(a == 0 for a, b in zip(given, labels, strict=False) if b == 0)
        decomposed_agree += (len(given) == len(labels) and all(given)) == faithful
        holistic_agree += (CONTEXT.scores(holistic.parsed)["faithfulness"] >= 4) == faithful
    scored = len(answers) - failed
    print(f"judge: {client.settings.model}; {len(answers)} answers, {statements_n} labelled statements")
    print(f"statement verdicts agree with the labels: {share(statement_agree, statements_n)}")
    print(f"unsupported statements the judge rejected: {share(caught, unsupported)}")
    print(
        f"answer faithful (every statement supported), statement verdicts: {share(decomposed_agree, scored)}"
    )
    print(f"answer faithful (holistic 1-5 faithfulness >= 4):                {share(holistic_agree, scored)}")
    print(f"judge failures (no valid reply): {failed}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", default="local/qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--smoke", action="store_true", help="the fake server as judge, 2 answers")
    args = parser.parse_args()
    answers = [record for _, record in jsonl_records(LABELS.read_text(encoding="utf-8"), LABELS)]
    if not args.smoke:
        settings = LLMSettings(model=args.judge, max_tokens=700)
        with LLMClient(settings) as client:  # the default LLM cache, as a default run uses
            measure(client, answers)
        return 0

    def supported_always(request: dict) -> str:
        if "StatementVerdicts" in json.dumps(request):  # the schema is named in the request
            user = request["messages"][-1]["content"]
            count = sum(line[:1].isdigit() for line in user.splitlines())
            verdicts = [{"statement": "s", "reason": "r", "verdict": 1}] * count
            return json.dumps({"statements": verdicts})
        return json.dumps(
            {"reasoning": "ok", "faithfulness": 5, "relevance": 5, "helpfulness": 5, "toxicity": 1}
        )

    with FakeOpenAIServer(responder=supported_always) as server, tempfile.TemporaryDirectory() as cache:
        settings = LLMSettings(model="openai/fake-judge", api_base=server.base_url, max_retries=0)
        with LLMClient(settings, cache_location=cache, progress=False) as client:
            measure(client, answers[:2])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
