"""A real pipeline run (fake LLMs on loopback) carries its uncertainty end to end: per-case values,
intervals, the best cell tested against the others, the cases a decision needs, and the judge's
reliability against keyword tests, a second judge, repeated samples and human labels."""

import csv
import json
import threading
from statistics import fmean

import pytest

import run
from ragbench.inputs.eval_cases import EvalCase
from tests.conftest import MINILM
from tests.fake_openai_server import FakeOpenAIServer, last_user_text
from tests.projects import write_project

WORDS = ["amber", "basalt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "jasper"]
DOCUMENTS = {f"{word}.md": f"# {word}\nThe code word of file {word} is {word.upper()}." for word in WORDS}
CASES = [
    {
        "id": word,
        "question": f"What is the code word of file {word}?",
        "reference_answer": f"{word.upper()}.",
        "expected_sources": [f"{word}.md"],
        "good_words": [word.upper()],
    }
    for word in WORDS
]
CASES[0] |= {"human_answer": "I do not know.", "human_correctness": 1}
CASES[1] |= {"human_answer": f"It is {WORDS[1].upper()}.", "human_correctness": 5}
REFUSED = WORDS[:7]  # the weak reader refuses these


class Responder:
    """Readers by model; judges score by whether the answer holds the code word. judge-b disagrees on
    one answer, and changes its mind on every second sample of the same verdict."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, request: dict) -> str:
        text = last_user_text(request)
        if not request.get("response_format"):
            word = text.rsplit("file ", 1)[-1].split("?")[0].strip()
            weak = request["model"] == "weak-reader" and word in REFUSED
            return "The context does not say." if weak else f"It is {word.upper()} [1]."
        if "faithfulness" in json.dumps(request["messages"]):
            return json.dumps(
                {"reasoning": "ok", "faithfulness": 5, "relevance": 5, "helpfulness": 4, "toxicity": 1}
            )
        answer = text.split("<answer>", 1)[-1].split("</answer>", 1)[0]
        score = 1 if "not" in answer else 5
        if request["model"] == "judge-b":
            with self.lock:
                repeat = self.seen.get(text, 0)
                self.seen[text] = repeat + 1
            score = 4 if score == 5 and (repeat % 2 or WORDS[9].upper() in answer) else score
        return json.dumps({"reasoning": "compared with the reference", "score": score})


def test_a_run_reports_intervals_the_tie_set_cases_needed_and_judge_reliability(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=Responder()) as server:
        llm = f"api_base: {server.base_url}, max_retries: 0"
        write_project(
            tmp_path,
            DOCUMENTS,
            CASES,
            "name: uncertainty\n"
            f"grid: {{chunk_size: 64, embedding_model: {MINILM}, top_k: 3, top_n: 1,"
            " reader: [openai/strong-reader, openai/weak-reader], judge: [openai/judge-a, openai/judge-b]}\n"
            "retrieval: {metrics_k: 1}\n"
            f"generation: {{reader: {{{llm}}}}}\n"
            f"evaluation: {{judge: {{{llm}, temperature: 0.7}}, judge_samples: 2}}\n"
            f"llm_cache_dir: {tmp_path / 'llm-cache'}\n"
            "statistics: {resamples: 999}\n",
        )
        assert run.main(["--config", "config.yaml"]) == 0
    out = capsys.readouterr().out
    assert "Is the best really better?" in out
    assert "correctness (0-1):" in out and "missing good words (rate):" in out

    from zenml.client import Client

    pipeline_run = Client().get_pipeline("rag_benchmark").last_run
    table = pipeline_run.steps["build_results_table"].outputs["results"][0].load()
    rows = {row["label"]: row for row in table.rows}
    assert len(rows) == 4
    for row in table.rows:  # every mean is the mean of the per-case values it traces back to
        values = table.case_values[row["cell"]]
        for column in ("mrr", "correctness_0to1", "fail_good_answers"):
            assert row[column] == pytest.approx(fmean(values[column].values()), abs=1e-4)
            assert row[f"{column}_low"] <= row[column] <= row[f"{column}_high"]
        assert (
            pipeline_run.run_metadata[f"correctness_0to1_low__{row['cell']}"] == row["correctness_0to1_low"]
        )

    correctness = next(v for v in table.verdicts if v.column == "correctness_0to1")
    strong = {label for label in rows if "strong" in label}  # verdicts name cells by id, people by label
    assert correctness.name(correctness.best) in strong
    assert {correctness.name(cell) for cell in correctness.tied} == strong  # the weak reader is told apart
    weak_comparisons = [c for c in correctness.comparisons if "weak" in correctness.name(c.candidate)]
    assert all(c.verdict == "worse" and c.test == "paired_permutation" for c in weak_comparisons)
    assert correctness.cases_needed is not None and str(correctness.cases_needed) in correctness.sentence()

    reliability = table.judge_reliability
    assert reliability.keyword.compared >= 30 and not reliability.keyword.contradictions
    assert len(reliability.judge_pairs) == 2 and all(p.kappa is not None for p in reliability.judge_pairs)
    assert {h.judge for h in reliability.human} == {"openai/judge-a", "openai/judge-b"}
    judge_a = next(h for h in reliability.human if h.judge == "openai/judge-a")
    assert judge_a.cases == 2 and judge_a.exact == 1.0
    (changing,) = [
        c for c in reliability.consistency if c.judge == "openai/judge-b" and c.criterion == "correctness"
    ]
    assert changing.samples == 2 and changing.changed > 0
    assert not [c for c in reliability.consistency if c.judge == "openai/judge-a" and c.changed]

    report = (tmp_path / "out" / "latest" / "results.html").read_text()
    assert 'id="significance"' in report and 'id="judge"' in report and "Tied with the best" in report
    lines = list(csv.DictReader((tmp_path / "out" / "latest" / "case_values.csv").open()))
    assert {"cell", "label", "metric", "case", "value"} <= set(lines[0])
    assert len({line["case"] for line in lines}) == len(WORDS)


def test_a_human_label_needs_its_answer_and_a_reference():
    with pytest.raises(ValueError, match="go together"):
        EvalCase(id="x", question="q?", reference_answer="r", human_correctness=3)
    with pytest.raises(ValueError, match="needs reference_answer"):
        EvalCase(id="x", question="q?", human_answer="a", human_correctness=3)
