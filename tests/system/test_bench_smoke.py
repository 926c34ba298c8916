"""Every script in bench/ runs on tiny data and prints the numbers it promises, so a refactor cannot
silently break a bench; a new bench script fails here until it has a smoke run in SMOKE_RUNS.

A smoke run checks that each bench runs and prints its ratios (speed-ups, throughput ratios) as positive
finite numbers, never their values: on tiny data, on a loaded 2-core machine, a timing says nothing, so
each bench's `--smoke` reports its goals instead of failing on them. `make bench` enforces them."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from tests.unit.test_bench_ppi import check_ppi

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH_SCRIPTS = sorted((REPO_ROOT / "bench").glob("*.py"))
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def parse_table(stdout: str) -> list[dict[str, str]]:
    """The rows of the fixed-width table `ragbench.report.pages.rows_to_text` printed (values hold no
    spaces)."""
    lines = stdout.splitlines()
    start = next(i for i in range(1, len(lines)) if re.fullmatch(r"-+( +-+)*", lines[i].strip()))
    header = lines[start - 1].split()
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(dict(zip(header, line.split(), strict=True)))
    assert rows, stdout
    assert list(rows[0]) == header
    return rows


def ratio(text: str) -> float:
    """A printed ratio: a positive finite number (whatever its value)."""
    value = float(text)
    assert math.isfinite(value) and value > 0, f"ratio {text!r} is not a positive finite number"
    return value


def printed(text: str) -> tuple[float, float]:
    """The interval a rounded printed number stands for (its last digit +- half a unit; "1.235e+04" too)."""
    half = 0.5 * 10.0 ** Decimal(text).as_tuple().exponent
    return float(text) - half, float(text) + half


def agrees_with_quotient(shown: str, numerator: str, denominator: str) -> bool:
    """`shown` is numerator / denominator up to the rounding of all three printed numbers."""
    low, high = printed(shown)
    top_low, top_high = printed(numerator)
    bottom_low, bottom_high = printed(denominator)
    quotient_low = top_low / bottom_high
    quotient_high = top_high / bottom_low if bottom_low > 0 else math.inf
    return low <= quotient_high and quotient_low <= high


def check_index_build(stdout: str) -> None:
    """One row for the one model; the counter matches the grid's chunks (two index steps share it)."""
    (row,) = parse_table(stdout)
    assert list(row) == [
        "embedding",
        "chunks_in_grid",
        "raw_chunks_per_s",
        "pipeline_chunks_per_s",
        "ratio",
        "chunk_texts_encoded",
        "one_encode_per_chunk",
    ]
    assert row["embedding"] == MINILM
    assert int(row["chunks_in_grid"]) == int(row["chunk_texts_encoded"]) > 0
    assert row["one_encode_per_chunk"] == "True"
    ratio(row["raw_chunks_per_s"]), ratio(row["pipeline_chunks_per_s"]), ratio(row["ratio"])
    assert agrees_with_quotient(row["ratio"], row["pipeline_chunks_per_s"], row["raw_chunks_per_s"]), row
    assert stdout.rstrip().endswith("(smoke: ratio not enforced) -> PASS")


def check_llm_concurrency(stdout: str) -> None:
    """Both clients made every call one at a time, then at most the limit at once, and each printed its
    speed-up and its goal (reported, not enforced: how many calls overlap is up to the machine's load)."""
    for client in ("", "external "):
        batches = re.findall(
            rf"^{client}concurrency +(\d+): .* for (\d+) calls .* server saw max (\d+) in flight",
            stdout,
            re.M,
        )
        assert [(limit, calls) for limit, calls, _ in batches] == [("1", "8"), ("4", "8")], stdout
        (_, _, serial), (_, _, parallel) = batches
        assert serial == "1" and 1 <= int(parallel) <= 4, stdout
    speedups = re.findall(
        r"^(LLM|external) speed-up (\S+)x \(goal >= ([\d.]+)x.*: (met|missed), not enforced \(smoke\)$",
        stdout,
        re.M,
    )
    assert [client for client, *_ in speedups] == ["LLM", "external"], stdout
    for _, speedup, goal, verdict in speedups:
        ratio(speedup)
        assert float(goal) == pytest.approx(3.2)
        assert verdict == ("met" if float(speedup) >= float(goal) else "missed")
    assert stdout.rstrip().endswith("(smoke: speed-up not enforced) -> PASS")


def check_scale(stdout: str) -> None:
    """Every part printed its table (a. builds, b. kill and resume, c. ANN vs flat, d. 1M on paper), the
    counts add up, and the resumed build encoded only the texts of the shards the killed one had not saved."""
    sections = re.split(r"\n(?=[a-d]\. )", stdout)
    tables = {section[0]: parse_table(section) for section in sections[1:]}
    assert list(tables) == ["a", "b", "c", "d"], stdout
    assert [int(row["chunks"]) for row in tables["a"]] == [100, 200]
    for row in tables["a"]:
        assert int(row["texts_encoded"]) == int(row["chunks"])
        assert 0 < int(row["peak_rss_mib"]) < 3 * 1024
        assert float(row["ms_per_chunk"]) > 0 and row["goals_met"] == "True"
    assert float(tables["a"][0]["vs_smallest"]) == 1
    for row in tables["a"]:
        ratio(row["vs_smallest"])
    (resume,) = tables["b"]
    chunks, shards, saved = int(resume["chunks"]), int(resume["shards"]), int(resume["saved_at_kill"])
    assert (chunks, shards, resume["killed"]) == (100, 5, "True")
    assert 0 < saved < shards and int(resume["reused"]) == saved
    assert int(resume["encoded_on_resume"]) == int(resume["expected"]) == chunks - 20 * saved
    assert int(resume["embedded_twice_at_most"]) <= 20
    assert float(resume["max_vector_diff"]) <= 1e-4 and resume["goals_met"] == "True"
    flat, *approximate = tables["c"]
    assert [row["index"] for row in tables["c"]] == ["flat", "hnsw", "ivf"]
    assert (flat["recall@10"], flat["speedup"], flat["bytes_per_vector"]) == ("1", "1", str(384 * 4))
    for row in approximate:
        assert 0 <= float(row["recall@10"]) <= 1 and float(row["ms_per_query"]) > 0
        ratio(row["speedup"])
        assert int(row["bytes_per_vector"]) >= 384 * 4  # float32 vectors plus graph links or list ids
    for index, paper in zip(tables["c"], tables["d"], strict=True):
        assert paper["index"] == index["index"]
        gib = int(index["bytes_per_vector"]) * 1e6 / 2**30
        assert float(paper["gib_at_1m"]) == pytest.approx(gib, abs=0.01)
        assert float(paper["embed_hours_at_1m"]) > 0
    assert stdout.rstrip().endswith("(smoke: build-time ratio, recall and speed-up not enforced) -> PASS")


def check_colbert_rerank(stdout: str) -> None:
    """Every question reranked its 30 candidates identically on both paths, the chunk set was encoded once
    (reported apart), the speed-up is the ratio of the two paths' mean seconds per question, and the rerank
    stage's cost per case is printed."""
    rows = parse_table(stdout)
    assert list(rows[0]) == ["case", "candidates", "reencode_s", "precomputed_s", "speedup", "identical"]
    assert len(rows) == 3
    for row in rows:
        assert row["candidates"] == "30" and row["identical"] == "True"
        assert float(row["reencode_s"]) > 0 and float(row["precomputed_s"]) > 0
    encoded = r"encoding (\d+) chunks \((\d+) tokens, [\d.]+ MiB float32\) [\d.]+ s"
    chunks, tokens = map(int, re.search(encoded, stdout).groups())
    assert 30 <= chunks < tokens
    per_question = r"re-encoding ([\d.]+) s, precomputed ([\d.]+) s, speed-up (\S+)x \(goal >= 5x\)"
    reencode, precomputed, speedup = re.search(per_question, stdout).groups()
    ratio(reencode), ratio(speedup)
    assert agrees_with_quotient(speedup, reencode, precomputed), (speedup, reencode, precomputed)
    assert "identical rankings: 3/3 questions" in stdout
    stage = r"rerank stage \(stored encodings, metrics included\): ([\d.]+) s per case over 3 cases"
    assert float(re.search(stage, stdout).group(1)) > 0, stdout
    assert stdout.rstrip().endswith("(smoke: speed-up not enforced) -> PASS")


def check_statement_judge(stdout: str) -> None:
    """The fake judge supports every statement and gives 5: each agreement is printed as a share."""
    statements = re.search(r"statement verdicts agree with the labels: (\d+)/(\d+)", stdout)
    assert statements and int(statements.group(2)) > 0, stdout
    assert re.search(r"holistic 1-5 faithfulness >= 4\): +\d+/2 ", stdout), stdout
    assert "judge failures (no valid reply): 0" in stdout


def check_local_prefix(stdout: str) -> None:
    """Each way's time and speed-up over fresh evaluation are printed; block reuse keeps every reply."""
    rows = {row["way"]: row for row in parse_table(stdout)}
    assert list(rows) == ["fresh", "blocks", "blocks-reversed", "unaligned"], stdout
    for row in rows.values():
        ratio(row["seconds"]), ratio(row["speedup"])
    assert rows["blocks"]["identical"] == rows["blocks-reversed"]["identical"] == "2"
    assert "replies identical to fresh: 2/2" in stdout
    assert "max_tokens 12, qwen2.5-coder-0.5b-instruct" in stdout, stdout


def check_racing(stdout: str) -> None:
    """Every scenario ran its replays and printed rates in [0, 1]; each criterion printed its verdict, and
    the verdict agrees with the printed rate (reported, not enforced, in smoke)."""
    rows = {row["scenario"]: row for row in parse_table(stdout)}
    assert list(rows) == ["clear", "harder", "binary", "equal", "real-mrr", "tie-mrr"], stdout
    for name, row in rows.items():
        assert row["replays"] == "5" and int(row["cells"]) >= 2, row
        synthetic = name in {"clear", "harder", "binary", "equal"}
        assert (row["cells"], row["cases"]) == ("4", "40") or not synthetic, row
        null = name in {"equal", "tie-mrr"}  # every cell as good: no best to keep
        assert (row["best_kept"] == "-") == null, row
        rates = [
            row["any_eliminated"],
            row["share_mean"],
            row["share_max"],
            *([] if null else [row["best_kept"]]),
        ]
        assert all(0 <= float(value) <= 1 for value in rates), row
        assert float(row["share_mean"]) <= float(row["share_max"]), row
    verdicts = re.findall(
        r"^(best cell kept|false elimination \(any cell\)|share of a full evaluation's calls).*? \((\S+)\): "
        r"(?:mean )?(\d+\.\d)%.*: (met|missed), not enforced \(smoke\)$",
        stdout,
        re.M,
    )
    assert [(kind[:4], name) for kind, name, *_ in verdicts] == [
        ("best", "clear"),
        ("best", "harder"),
        ("best", "binary"),
        ("fals", "equal"),
        ("best", "real-mrr"),
        ("fals", "tie-mrr"),
        ("shar", "clear"),
    ], stdout
    for kind, _, shown, verdict in verdicts:
        value = float(shown) / 100
        goal = {"best": value >= 0.95, "fals": value <= 0.05, "shar": value <= 0.2}[kind[:4]]
        assert verdict == ("met" if goal else "missed"), (kind, shown, verdict)
    assert re.search(r"false elimination .*Wilson 95% \[\d+\.\d%, \d+\.\d%\]", stdout), stdout
    assert stdout.rstrip().endswith("(smoke: criteria not enforced) -> PASS")


def check_search(stdout: str) -> None:
    """Every strategy ran its replays on the smoke space and printed shares in [0, 1]: the full grid used
    every call and is inside its own tie set, the searches used fewer, greedy ended on the planted chunk size
    more often than staged; each goal printed its verdict, reported, not enforced."""
    rows = {row["strategy"]: row for row in parse_table(stdout)}
    assert list(rows) == ["full_grid", "racing", "greedy", "staged", "model_based"], stdout
    for name, row in rows.items():
        assert (row["space"], row["cells"]) == ("48", "48"), row
        assert row["replays"] == ("1" if name == "racing" else "4"), row
        shares = ["in_tie_set", "lost_planted", "calls_share", "calls_max", "coverage"]
        assert all(0 <= float(row[column]) <= 1 for column in shares), row
        assert float(row["calls_share"]) <= float(row["calls_max"]), row
    assert float(rows["full_grid"]["calls_share"]) == 1 and float(rows["full_grid"]["in_tie_set"]) == 1
    assert all(float(rows[name]["calls_max"]) < 1 for name in ("greedy", "staged", "model_based")), stdout
    assert float(rows["greedy"]["lost_planted"]) > float(rows["staged"]["lost_planted"]), stdout
    verdicts = re.findall(
        r"^(.*?) \(space 48\): (?:.*: )?(met|missed), not enforced \(smoke\)$", stdout, re.M
    )
    assert [kind.split()[0] for kind, _ in verdicts] == ["staged", "greedy", "staged", "model_based"], stdout
    assert stdout.rstrip().endswith("(smoke: criteria not enforced) -> PASS"), stdout


def check_trained_reranker(stdout: str) -> None:
    """Every stage ran (questions, pairs, training, reranking on both checkpoints), no eval case reached
    training, and each reranker's MRR and nDCG@10 came with an interval and a paired gain over no
    reranking with its interval and p-value."""
    assert stdout.rstrip().endswith("PASS: every stage ran; no eval case reached training"), stdout
    number = r"[-+]?\d\.\d{3}"
    interval = rf"{number} \[{number}, {number}\]"
    gain = rf"[-+]\d\.\d{{3}} \[{number}, {number}\] p=\d\.\d{{3}}"
    assert re.search(rf"^off +{interval} +{interval}\s*$", stdout, re.M), stdout
    for name in (r"colbert-standin \(UNTRAINED\)", "trained"):
        assert re.search(rf"^{name} +{interval} +{gain} +{interval} +{gain}\s*$", stdout, re.M), stdout
    assert re.search(r"training: \d+ s, [1-9]\d* steps", stdout), stdout
    versus = rf"^trained vs the UNTRAINED stand-in: mrr {gain}; ndcg@10 {gain}$"
    assert re.search(versus, stdout, re.M), stdout


def check_dry_run(stdout: str) -> None:
    """Every measure timed; each dry run's ratio to the config alone a positive finite number and its goal
    reported, not enforced (the bench itself fails when the store's memo and the store gave other plans)."""
    rows = {row["measure"]: row for row in parse_table(stdout)}
    assert set(rows) == {"config_alone", "dry_run_no_store", "dry_run_store", "dry_run_store_changed"}, stdout
    assert all(float(row["median_cpu_s"]) > 0 and float(row["median_wall_s"]) > 0 for row in rows.values())
    for name in ("dry_run_no_store", "dry_run_store"):
        shown = re.search(rf"^{name} / config alone \(CPU\): (\S+)x$", stdout, re.M)
        assert shown is not None, stdout
        ratio(shown.group(1))
        goal = rf"^{name} CPU \S+ s \(goal < 5 s\): (met|missed), not enforced \(smoke\)$"
        assert re.search(goal, stdout, re.M), stdout


def check_traces(stdout: str) -> None:
    """Ten traces of 30 spans read, every one judged once and annotated, the rates printed."""
    rows = parse_table(stdout)
    assert [row["source"] for row in rows] == ["file", "phoenix"][: len(rows)]
    for row in rows:
        assert (row["spans"], row["traces"], row["judge_calls"], row["annotated"]) == ("30", "10", "10", "10")
        assert all(float(row[column]) > 0 for column in ("read_traces_per_s", "run_s", "scored_traces_per_s"))


def check_small_intervals(stdout: str) -> None:
    """Every kind of metric at every size, each with old, new and reference coverages in [0, 1]; no new
    interval of width zero (the point masses included); the lowest coverage reported, not enforced."""
    rows = parse_table(stdout)
    assert {row["kind"] for row in rows} == {"score", "rate", "difference"}, stdout
    assert {row["n"] for row in rows} == {"3", "5", "10", "20", "40"}, stdout
    for row in rows:
        assert all(0 <= float(row[column]) <= 1 for column in ("new_cover", "old_cover", "ref_cover")), row
        assert float(row["new_width"]) > 0 and row["ref"] == ("wilson" if row["kind"] == "rate" else "t"), row
    assert any(float(row["old_width"]) == 0 for row in rows), (
        "the point masses should show the old intervals' zero widths"
    )
    assert re.search(r"^lowest new coverage \d\.\d{3} \(target >= 0\.93\)$", stdout, re.M), stdout


def check_label_replay(stdout: str) -> None:
    """Both sample plans, 20 labels, a row per reader whose corrected mean lies in its interval."""
    rows = parse_table(stdout)
    assert {(row["plan"], row["labels"]) for row in rows} == {("sample", "20"), ("sample_uncertain", "20")}
    for row in rows:
        assert float(row["low"]) <= float(row["corrected"]) <= float(row["high"]), row
        assert 0 <= float(row["person_all"]) <= 1 and 0 <= float(row["judge_alone"]) <= 1


SMOKE_RUNS: dict[str, tuple[list[str], Callable[[str], None]]] = {
    # The first document ('assert') is the expected source of one case; two chunk sizes make two index
    # steps and two top_k values two retrieve steps per index, so re-embedding would show in the count.
    "bench_index_build.py": (
        [
            "--documents=1",
            "--set=grid.chunk_size=[128,256]",
            f"--set=grid.embedding_model=[{MINILM}]",
            "--set=grid.top_k=[5,10]",
            "--smoke",
        ],
        check_index_build,
    ),
    "bench_llm_concurrency.py": (
        ["--requests=8", "--latency=0.1", "--concurrency=4", "--smoke"],
        check_llm_concurrency,
    ),
    # Pydoc topics, sizes 100 and 200 in shards of 20: the kill/resume path really runs, no apt install.
    "bench_scale.py": (["--smoke"], check_scale),
    # The first 4 documents at 128 tokens make 48 chunks, enough for 30 candidates per question.
    "bench_colbert_rerank.py": (
        ["--documents=4", "--chunk-size=128", "--questions=3", "--smoke"],
        check_colbert_rerank,
    ),
    # The first 6 documents, cloze questions only (no LLM), a few steps of training.
    "bench_trained_reranker.py": (
        ["--documents=6", "--chunks=0", "--max-minutes=0.2", "--smoke"],
        check_trained_reranker,
    ),
    # The fake server as the judge on the first two labelled answers.
    "bench_statement_judge.py": (["--smoke"], check_statement_judge),
    # The local 0.5B (standing in for the 1.5B judge) on 2 planted answers of one case, 12-token replies.
    "bench_local_prefix.py": (["--smoke"], check_local_prefix),
    # 5 replays of each scenario on 4 synthetic cells x 40 cases and on the first 4 real cells of
    # bench/data/race_replay_mrr.csv.
    "bench_racing.py": (["--smoke"], check_racing),
    # 4 replays of every strategy (racing alone: 1) on a 48-cell space of 40 cases.
    "bench_search.py": (["--smoke"], check_search),
    # A few replications of every label count, judge and plan on 200 answers (tests/unit/test_bench_ppi.py).
    "bench_ppi.py": (["--smoke"], check_ppi),
    # Two draws of 20 labels from the review example's exported run, the person's 64 labels as the oracle.
    "bench_label_replay.py": (["--smoke"], check_label_replay),
    # A one-cell project of one document and one case: one cheap real run (BM25, no reader: no model but
    # the chunking tokenizer) fills a store, then one run of each measure.
    "bench_dry_run.py": (["--smoke"], check_dry_run),
    # a few replications of every setting: coverages printed, widths never zero (bench_small_intervals.py)
    "bench_small_intervals.py": (["--smoke"], check_small_intervals),
    # 10 traces (30 spans) read, then one real run with the fake judge scoring and annotating them.
    "bench_traces.py": (["--smoke"], check_traces),
}


def test_every_smoke_run_names_a_bench_script() -> None:
    assert set(SMOKE_RUNS) <= {script.name for script in BENCH_SCRIPTS}


def run_bench(script: Path, args: list[str], zenml: Path, timeout: int = 600) -> str:
    """What a bench script prints, run in its own ZenML store (`zenml`); it must exit 0."""
    result = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=REPO_ROOT,
        env={**os.environ, "ZENML_CONFIG_PATH": str(zenml)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.parametrize("script", BENCH_SCRIPTS, ids=lambda script: script.stem)
def test_bench_script_smoke(script: Path, tmp_path: Path) -> None:
    assert script.name in SMOKE_RUNS, f"bench/{script.name} has no smoke run: add one to SMOKE_RUNS"
    args, check = SMOKE_RUNS[script.name]
    check(run_bench(script, list(args), tmp_path / "zenml"))


def run_llm_concurrency(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "bench_llm_concurrency.py"), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_missed_speed_up_is_reported_in_smoke_mode_and_fails_the_full_bench() -> None:
    """8 requests of no latency cannot run 80x faster under a limit of 100: a goal missed for sure, as a
    loaded machine would miss one. The smoke run reports it and passes; the full bench fails on it."""
    args = ["--requests=8", "--latency=0", "--concurrency=100"]
    smoke = run_llm_concurrency(*args, "--smoke")
    assert smoke.returncode == 0, f"{smoke.stdout}\n{smoke.stderr}"
    assert smoke.stdout.count("(goal >= 80.0x = 0.8 x 100): missed, not enforced (smoke)") == 2, smoke.stdout
    assert smoke.stdout.rstrip().endswith("(smoke: speed-up not enforced) -> PASS")
    full = run_llm_concurrency(*args)
    assert full.returncode == 1, f"{full.stdout}\n{full.stderr}"
    assert full.stdout.count("(goal >= 80.0x = 0.8 x 100): FAIL") == 2, full.stdout
    assert full.stdout.rstrip().endswith("and speed-up >= 80.0x -> FAIL")
