"""Do the LLM client and the external-system client really overlap requests? Times N uncached calls of
each at concurrency 1 and at the limit.

Uses the loopback fakes (an OpenAI server, a RAG service) with a fixed per-call latency, so the only
variable is how many requests a client keeps in flight. Goal: speed-up >= 0.8 x the concurrency limit.

`--smoke` is for tests on a few requests, where the machine's load decides the timing: every call must
still be made, but the speed-ups are reported, not enforced (the exit code ignores them).

    python bench/bench_llm_concurrency.py [--requests 32] [--latency 0.25] [--concurrency N] [--smoke]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ragbench.generation.external import ExternalClient
from ragbench.generation.systems import ExternalSystem
from ragbench.llm.client import LLMClient
from ragbench.llm.types import LLMSettings
from tests.fake_openai_server import FakeOpenAIServer
from tests.fake_rag_service import FakeRagService

GOAL_FRACTION = 0.8


def timed_batch(server: FakeOpenAIServer, concurrency: int, prompts: list[str], cache_dir: Path) -> float:
    """Wall time of one `complete_many` over `prompts`, all uncached (fresh cache dir)."""
    settings = LLMSettings(model="openai/bench-alias", api_base=server.base_url, concurrency=concurrency)
    client = LLMClient(settings, cache_location=cache_dir, progress=False)
    client.complete("warm-up")  # litellm's first call carries one-off setup time
    server.reset_counters()
    started = time.perf_counter()
    results = client.complete_many(prompts, desc=f"concurrency {concurrency}")
    elapsed = time.perf_counter() - started
    stats = client.stats.snapshot()
    failed = sum(not r.ok for r in results)
    if failed or stats["cache_hits"] or server.request_count != len(prompts):
        raise SystemExit(
            f"bench invalid: {failed} failed, {stats['cache_hits']} cache hits, "
            f"{server.request_count} requests for {len(prompts)} prompts"
        )
    print(
        f"concurrency {concurrency:>3}: {elapsed:6.2f} s wall for {len(prompts)} calls "
        f"({len(prompts) / elapsed:5.1f} calls/s), server saw max {server.max_in_flight} in flight"
    )
    return elapsed


def timed_external_batch(
    service: FakeRagService, concurrency: int, questions: list[str], cache_dir: Path
) -> float:
    """Wall time of one `ask_many` over `questions`, all uncached (fresh cache dir)."""
    system = ExternalSystem(name="bench", http={"url": service.url}, concurrency=concurrency, max_retries=0)
    with ExternalClient(system, cache_location=str(cache_dir), progress=False) as client:
        service.reset_counters()
        started = time.perf_counter()
        results = client.ask_many(questions)
        elapsed = time.perf_counter() - started
    failed = sum(result.reply is None for result in results)
    if failed or any(result.cached for result in results) or service.request_count != len(questions):
        raise SystemExit(
            f"bench invalid: {failed} failed, {service.request_count} requests for {len(questions)}"
        )
    print(
        f"external concurrency {concurrency:>3}: {elapsed:6.2f} s wall for {len(questions)} calls "
        f"({len(questions) / elapsed:5.1f} calls/s), server saw max {service.peak_in_flight} in flight"
    )
    return elapsed


def main() -> int:
    default_concurrency = int(LLMSettings.model_fields["concurrency"].default)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.25, help="seconds the fake server takes per call")
    parser.add_argument("--concurrency", type=int, default=default_concurrency)
    parser.add_argument("--smoke", action="store_true", help="report the speed-ups but do not fail on them")
    args = parser.parse_args()

    prompts = [f"distinct question number {i}" for i in range(args.requests)]
    print(f"{args.requests} requests, {args.latency} s simulated latency each, limit {args.concurrency}")
    with FakeOpenAIServer(latency_s=args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        serial = timed_batch(server, 1, prompts, Path(tmp) / "serial")
        parallel = timed_batch(server, args.concurrency, prompts, Path(tmp) / "parallel")
    with FakeRagService(delay_s=args.latency) as service, tempfile.TemporaryDirectory() as tmp:
        external_serial = timed_external_batch(service, 1, prompts, Path(tmp) / "serial")
        external_parallel = timed_external_batch(service, args.concurrency, prompts, Path(tmp) / "parallel")
    goal = GOAL_FRACTION * args.concurrency
    passed = True
    for client, speedup in (("LLM", serial / parallel), ("external", external_serial / external_parallel)):
        met = speedup >= goal
        passed &= args.smoke or met
        if args.smoke:
            verdict = f"{'met' if met else 'missed'}, not enforced (smoke)"
        else:
            verdict = "PASS" if met else "FAIL"
        print(
            f"{client} speed-up {speedup:.2f}x (goal >= {goal:.1f}x = {GOAL_FRACTION} x {args.concurrency}): "
            f"{verdict}"
        )
    enforced = " (smoke: speed-up not enforced)" if args.smoke else f" and speed-up >= {goal:.1f}x"
    print(f"\ngoal: every call made{enforced} -> {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
