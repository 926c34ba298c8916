"""A real run (fake LLMs on loopback) with `evaluation.judge_repeats`: a judge that answers at random
either side of the pass threshold on a planted share of the answers is measured flipping at the planted
rate, and the cell's interval widens by the variance the judge adds."""

import json
import random
import threading

import run
from ragbench.scoring.metrics import MetricInfo
from ragbench.stats.inference import StatisticsConfig
from tests.conftest import MINILM
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import write_project

WORDS = ["amber", "basalt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "jasper"]
WORDS += ["kelp", "lumen"]
DOCUMENTS = {f"{word}.md": f"# {word}\nThe code word of file {word} is {word.upper()}." for word in WORDS}
CASES = [
    {
        "id": word,
        "question": f"What is the code word of file {word}?",
        "reference_answer": f"{word.upper()}.",
        "expected_sources": [f"{word}.md"],
    }
    for word in WORDS
]
NOISY = set(WORDS[::3])  # a third of the answers: 3 or 4 at random, the pass threshold being 4


class Responder:
    """The reader answers with the code word; the judge gives 5, or for a noisy answer 3 or 4 drawn anew
    each time the same prompt is asked."""

    def __init__(self) -> None:
        self.asked: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, request: dict) -> str:
        text = last_user_text(request)
        if not request.get("response_format"):
            return f"It is {text.rsplit('file ', 1)[-1].split('?')[0].strip().upper()} [1]."
        word = text.split("code word of file ", 1)[1].split("?", 1)[0]
        with self.lock:
            n = self.asked[text] = self.asked.get(text, 0) + 1
        score = random.Random(f"{text}:{n}").choice((3, 4)) if word in NOISY else 5
        return json.dumps({"reasoning": "compared with the reference", "score": score})


def test_a_run_measures_a_planted_flip_rate_and_widens_the_cell_interval(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=Responder()) as server:
        llm = f"api_base: {server.base_url}, max_retries: 0"
        write_project(
            tmp_path,
            DOCUMENTS,
            CASES,
            "name: repeats\n"
            f"grid: {{chunk_size: 64, embedding_model: {MINILM}, top_k: 2, top_n: 1,"
            " reader: [openai/reader], judge: [openai/judge]}\n"
            "retrieval: {metrics_k: 1}\n"
            f"generation: {{reader: {{{llm}}}, sample_size: {len(WORDS)}}}\n"
            f"evaluation: {{judge: {{{llm}}}, rubrics: [correctness], judge_check: null,"
            " judge_repeats: {count: 4, sample: 12, reorder_share: 0.5}}\n"
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\n"
            "statistics: {resamples: 999}\n",
        )
        assert run.main(["--config", "config.yaml"]) == 0
        assert server.request_count == 12 + 12 + 12 * 4  # every repeat asked, none served from cache
    out = capsys.readouterr().out
    assert "repeats on correctness" in out

    from zenml.client import Client

    pipeline_run = Client().get_pipeline("rag_benchmark").last_run
    table = pipeline_run.steps["build_results_table"].outputs["results"][0].load()
    (measured,) = table.judge_reliability.repeatability
    assert measured.answers == 12 and measured.repeats == 4
    # each repeat of a noisy answer flips with probability 1/2: 1/3 * 1/2 planted; sd sqrt(4/16) / 12
    assert abs(measured.flip_rate - 1 / 6) < 3 * 0.042
    assert measured.flip_low is not None and measured.flip_low <= 1 / 6 <= measured.flip_high
    assert 0 < measured.straddling <= len(NOISY) / len(WORDS)
    assert measured.identical_flip is not None and measured.reordered_flip is not None

    (row,) = table.rows
    values = list(table.case_values[row["cell"]]["correctness_0to1"].values())
    plain = MetricInfo(column="c", label="c", higher_is_better=True, bounds=(0.0, 1.0)).interval(
        values, StatisticsConfig(resamples=999)
    )
    assert plain is not None and plain.low is not None and plain.high is not None
    assert row["correctness_0to1_judge_variance"] > 0
    assert row["correctness_0to1_high"] - row["correctness_0to1_low"] > plain.high - plain.low
    report = (tmp_path / "out" / "latest" / "results.html").read_text()
    assert "straddle the threshold" in report
