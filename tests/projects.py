"""Small benchmark projects on disk for integration tests: a folder knowledge base, eval cases, a config."""

import contextlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fake_openai_server import FakeOpenAIServer


def write_knowledge_base(root: Path, documents: dict[str, str], cases: list[dict] | None = None) -> None:
    """`root/kb/<document>`, and `root/cases.jsonl` unless `cases` is None."""
    for name, text in documents.items():
        path = root / "kb" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if cases is not None:
        (root / "cases.jsonl").write_text("\n".join(json.dumps(case) for case in cases))


def newest_run():
    """The newest run of the benchmark pipeline in the active ZenML store (the one a test just started)."""
    from zenml.client import Client

    return Client().get_pipeline("rag_benchmark").last_run


def printed(*arguments: str, command: tuple[str, ...] = ()) -> tuple[int, str, str]:
    """`run.main` on `config.yaml` in the working directory (`command`, e.g. `("race",)`, before its
    options): the exit code and what it printed to stdout and to stderr, each run's own, so a test that
    runs several times can check every run's messages and why a failed one failed."""
    import run  # the CLI loads ZenML: only the tests that run it pay for that

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run.main([*command, "--config", "config.yaml", *arguments])
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def serving_fake_openai(
    root: Path, monkeypatch: pytest.MonkeyPatch, responder: Callable[[dict], str]
) -> Iterator[FakeOpenAIServer]:
    """A FakeOpenAIServer answering with `responder`, for a project in `root` run from there (configs name
    `kb`, `out` and the LLM cache relative to it), with a dummy OpenAI key (the client will not start
    without one; the fake server never checks it). Yields the server: its requests are what tests read."""
    monkeypatch.chdir(root)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=responder) as server:
        yield server


def write_project(root: Path, documents: dict[str, str], cases: list[dict], config: str) -> None:
    """`root/kb/<document>`, `root/cases.jsonl` and `root/config.yaml`: the shared lines (a name of its
    own unless `config` has one, folder knowledge base, the cases, output in `root/out`), then `config`."""
    write_knowledge_base(root, documents, cases)
    # runs of one config name are one history that the regression gate compares within: unique per test
    named = any(line.startswith("name:") for line in config.splitlines())  # a top-level key, not a rubric's
    name = "" if named else f"name: {root.parent.name}-{root.name}\n".lower()  # a config name is lowercase
    (root / "config.yaml").write_text(
        name + "knowledge_base: {kind: folder, path: kb}\neval_cases: cases.jsonl\noutput_dir: out\n" + config
    )


# Four keyword pages and a case on each, every answer right: the project whose LLM calls the spend tests count
FOUR_KEYWORD_PAGES = {
    f"{topic}.md": f"# {topic}\nThe {topic} statement is a Python keyword." for topic in "abcd"
}
FOUR_KEYWORD_CASES = [
    {
        "id": f"case-{topic}",
        "question": f"What is {topic}?",
        "reference_answer": f"{topic} is a keyword.",
        "expected_sources": [f"{topic}.md"],
    }
    for topic in "abcd"
]


def right_keyword_reply(request: dict) -> str:
    """The fake server's reply on the four keyword cases: the reader's right answer citing its passage, the
    judge's top score (a verdict is the one structured reply)."""
    if not request.get("response_format"):  # the reader
        return "It is a Python keyword [1]."
    return json.dumps({"reasoning": "matches", "score": 5})


def write_one_cell_project(root: Path, base_url: str) -> None:
    """The four keyword cases (`right_keyword_reply` answers them) in one cell whose reader and judge are
    the FakeOpenAIServer at `base_url`: 4 answers and 4 verdicts on one rubric, a plan of 8 calls. One call
    at a time, so failures injected into the server meet known calls; the reader retries up to 3 times,
    the judge never; no gate (a spend test's runs are not compared)."""
    write_project(
        root,
        FOUR_KEYWORD_PAGES,
        FOUR_KEYWORD_CASES,
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 2, "
        f"top_n: 1, reader: [{{model: openai/reader, api_base: {base_url}}}], "
        f"judge: [{{model: openai/judge, api_base: {base_url}}}]}}\n"
        "generation: {sample_size: 4, reader: {max_retries: 3, concurrency: 1}}\n"
        "evaluation: {judge: {max_retries: 0, concurrency: 1}, rubrics: [correctness], "
        "judge_check: null, keyword_tests: false}\n"
        "retrieval: {metrics_k: 1}\nregression: {baseline: none}\n"
        "llm_cache_dir: llm-cache\n",
    )


KEYWORD_TOPICS = ["assert", "break", "with", "yield", "lambda", "global", "class", "import", "raise"]


def write_keyword_topics(root: Path, cases: int) -> None:
    """`root/kb/<topic>.md` and `root/cases.jsonl`: the first `cases` Python keywords, one page and one
    case each (reference answer and expected source)."""
    (root / "kb").mkdir(exist_ok=True)
    for topic in KEYWORD_TOPICS[:cases]:
        (root / "kb" / f"{topic}.md").write_text(f"# {topic}\nThe {topic} statement is a Python keyword.")
    (root / "cases.jsonl").write_text(
        "\n".join(
            json.dumps(
                {
                    "id": topic,
                    "question": f"What is {topic}?",
                    "reference_answer": f"A keyword: {topic}.",
                    "expected_sources": [f"{topic}.md"],
                }
            )
            for topic in KEYWORD_TOPICS[:cases]
        )
    )


# Three one-line pages and a case on each: the smallest project that still has a best and a worst answer.
THREE_TOPICS = {
    "errors.md": "# Errors\nA failing assert statement raises AssertionError.",
    "loops.md": "# Loops\nThe break statement ends the innermost loop at once.",
    "files.md": "# Files\nThe with statement closes a file automatically when the block ends.",
}
THREE_TOPIC_CASES = [
    {
        "id": "assert",
        "question": "Which exception does a failing assert raise?",
        "reference_answer": "AssertionError.",
        "expected_sources": ["errors.md"],
    },
    {
        "id": "break",
        "question": "How do I leave a loop early?",
        "reference_answer": "Use the break statement.",
        "expected_sources": ["loops.md"],
        "tags": ["flags"],
    },
    {
        "id": "with",
        "question": "What closes a file for me automatically?",
        "reference_answer": "The with statement.",
        "expected_sources": ["files.md"],
    },
]


def fake_llm_config(
    root: Path,
    base_url: str,
    *,
    name: str,
    grid: str = "top_k: 2, top_n: 1",
    reader_options: str = "",
) -> None:
    """`root/config.yaml` for the pipeline tests whose reader and judge are one FakeOpenAIServer at
    `base_url`, on `root/kb` (`write_knowledge_base`, `write_keyword_topics`): a one-cell grid (chunks of
    64, MiniLM, `grid` adding top_k and the like), no retries (a fault is counted, not hidden), no judge
    card (its calls would blur the counts the tests make), the LLM cache in `root/llm-cache`;
    `reader_options` add to the reader's settings."""
    llm = f"api_base: {base_url}, max_retries: 0"
    (root / "config.yaml").write_text(
        f"name: {name}\n"
        "knowledge_base: {kind: folder, path: kb}\n"
        "eval_cases: cases.jsonl\n"
        "output_dir: out\n"
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, "
        f"{grid}, reader: openai/fake-reader, judge: openai/fake-judge}}\n"
        "retrieval: {metrics_k: 1}\n"
        f"generation: {{reader: {{{llm}{reader_options}}}}}\n"
        f"evaluation: {{judge: {{{llm}}}, judge_check: null}}\n"
        f"llm_cache_dir: {root / 'llm-cache'}\n"
    )


# Three pages of one topic each, each long enough to be a chunk the testset samples (over 50 characters)
TESTSET_PAGES = {
    "errors.md": "# Errors\n"
    + "A failing assert statement raises AssertionError when its condition is false. " * 3,
    "loops.md": "# Loops\n" + "The break statement ends the innermost enclosing loop at once. " * 3,
    "files.md": "# Files\n" + "The with statement closes a file automatically when its block ends. " * 3,
}


def write_testset_config(
    root: Path, base_url: str, *, name: str, testset: str, llm: str = "max_retries: 0"
) -> None:
    """`root/config.yaml` for `run.py testset` on `root/kb` (`TESTSET_PAGES`), then a benchmark on its set:
    generator, critic, reader and judge all on the FakeOpenAIServer at `base_url` (`llm`: their other
    settings), 3 chunks sampled evenly, the set the artifact `<name>-eval-set` (the default name) that the
    benchmark's eval cases name, no gate (the tests are about eval sets); `testset` adds what the tests
    vary to the testset block (unanswerable_share, evolutions, filters)."""
    settings = f"{{api_base: {base_url}, {llm}}}"
    (root / "config.yaml").write_text(
        f"name: {name}\noutput_dir: out\nregression: {{baseline: none}}\n"
        "knowledge_base: {kind: folder, path: kb}\n"
        f"eval_cases: {{artifact: {name}-eval-set}}\n"
        "grid: {chunk_size: 64, embedding_model: sentence-transformers/all-MiniLM-L6-v2, top_k: 3, "
        "top_n: 2, reader: openai/fake-reader, judge: openai/fake-judge}\n"
        "retrieval: {metrics_k: 1}\n"
        f"generation: {{reader: {settings}}}\n"
        f"evaluation: {{judge: {settings}}}\n"
        "testset: {chunks: 3, sampling: even, min_chunk_chars: 50, generator: openai/fake-generator, "
        f"critic: openai/fake-critic, generator_defaults: {settings}, critic_defaults: {settings}, "
        f"{testset}}}\n"
        f"llm_cache_dir: {root / 'llm-cache'}\n"
    )


def no_retry_llm(base_url: str) -> str:
    """An LLM's settings for the FakeOpenAIServer at `base_url`, as a YAML flow mapping: no retries, so a
    request the server fails is one failure the test sees, not a second call it must allow for."""
    return f"{{api_base: {base_url}, max_retries: 0}}"


def only_http_system(url: str) -> str:
    """The config lines of a run that benchmarks one external HTTP system alone (`team-rag` v1 at `url`,
    e.g. a FakeRagService): no grid cells of its own and no judge, so the system's requests are all there
    is to read; the LLM cache in the working directory."""
    return (
        "benchmark_grid: false\ngrid: {judge: []}\nretrieval: {metrics_k: 1}\n"
        f"systems: [{{name: team-rag, version: v1, http: {{url: '{url}'}}}}]\n"
        "llm_cache_dir: llm-cache\n"
    )
