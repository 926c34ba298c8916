"""The command outputs README and the docs show (`docs/record_outputs.py` recorded them from real runs)
are what the code prints today: the starter's `init` and `--dry-run` to the character, its run in
structure (the columns, blocks, warnings and sampled case ids; numbers aside, as the test's LLM calls go
to a fake server instead of the local models). A change that alters an output fails here until the
pages are re-recorded."""

import difflib
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from tests.fake_openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("record_outputs", ROOT / "docs" / "record_outputs.py")
record = sys.modules["record_outputs"] = importlib.util.module_from_spec(_spec)  # dataclasses look it up
_spec.loader.exec_module(record)

STARTER_MODEL = "local/qwen2.5-coder-1.5b-instruct"
FAKE_MODEL = "openai/gpt-4o-mini"  # a priced model name, as a hosted run has
_RUN_NAME = re.compile(r"rag_benchmark-[\w-]+?-\d{4}_\d\d_\d\d-\d\d_\d\d_\d\d-[0-9a-f]+")
# A number standing alone (not part of a case id like `case-3` or a hash), with its unit
_NUMBER = re.compile(r"(?<![A-Za-z_]-)(?<![\w.@])\d+(?:\.\d+)?(?:m\d+s|s|%)?(?!\w)")


def structure(lines: list[str]) -> list[str]:
    """What a shown output must keep: every line, with its numbers, run names and spacing left out."""
    shaped = []
    for line in lines:
        line = _NUMBER.sub("#", _RUN_NAME.sub("<run>", line))
        shaped.append(" ".join(re.sub(r"-{2,}", "-", line).split()))
    return shaped


def blocks_of(name: str) -> list[tuple[Path, str, list[str]]]:
    found = [
        (page, part, record.shown_lines(body)) for page, n, part, body in record.shown_blocks() if n == name
    ]
    assert found, f"no page shows the recording {name}"
    return found


def test_every_shown_block_is_a_known_recording_as_the_recorder_writes_it():
    """No block edited by hand (its caption, date and command are the recorder's), none left unknown."""
    blocks = record.shown_blocks()
    assert {name for _, name, _, _ in blocks} == set(record.RECORDINGS)
    for page, name, part, body in blocks:
        recorded_on = re.search(r"\(Recorded on (\d{4}-\d\d-\d\d) by", body)
        assert recorded_on, f"{page}: the {name} block has no recording date"
        expected = "\n" + record.render(
            record.RECORDINGS[name], part, record.shown_lines(body), recorded_on[1]
        )
        assert body == expected + "\n", f"{page}: the {name} block is not as docs/record_outputs.py writes it"


def test_pages_showing_one_recording_show_the_same_run():
    for name in record.RECORDINGS:
        endings = {tuple(lines[-3:]) for _, _, lines in blocks_of(name)}
        assert len(endings) == 1, f"pages show different runs of {name}: re-record it"


@pytest.mark.parametrize("name", ["starter-init", "starter-dry-run", "hosted-dry-run"])
def test_init_and_the_dry_runs_print_what_the_pages_show(tmp_path, name):
    """None needs a model or a key: today's output must be the shown one, character for character."""
    today = record.run_recording(record.RECORDINGS[name], tmp_path)
    for page, part, shown in blocks_of(name):
        assert record.part_of(today, part) == shown, f"{page} shows an old {name}: re-record it"


def scripted_reply(request: dict) -> str:
    """The reader repeats the question; the judge passes every answer (so the card finds it UNRELIABLE,
    as the local judge the pages show is)."""
    if not request.get("response_format"):
        return "It depends on the passages [1]."
    return json.dumps({"reasoning": "looks right", "score": 5})


@pytest.mark.slow
def test_the_starter_run_prints_the_structure_the_pages_show(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DUMMY")
    with FakeOpenAIServer(responder=scripted_reply) as fake:
        overrides = (
            "--set", f"grid.reader=[{FAKE_MODEL}]", "--set", f"grid.judge=[{FAKE_MODEL}]",
            "--set", f"generation.reader.api_base={fake.base_url}",
            "--set", f"evaluation.judge.api_base={fake.base_url}",
        )  # fmt: skip
        today = record.run_recording(record.RECORDINGS["starter-run"], tmp_path, extra_args=overrides)
    today = [line.replace(FAKE_MODEL, STARTER_MODEL) for line in today]
    today[0] = today[0].split(" --set ")[0]  # the command as the pages show it
    for page, part, shown in blocks_of("starter-run"):
        difference = "\n".join(
            difflib.unified_diff(
                structure(shown), structure(record.part_of(today, part)), "shown", "today", lineterm=""
            )
        )
        assert not difference, (
            f"{page} shows an old starter run: re-record it (record_outputs.py starter-run)\n{difference}"
        )


def test_the_structure_keeps_what_a_reader_relies_on_and_drops_the_numbers():
    shown = [
        "cell  correctness_0to1  hit_rate@5",
        "local/qwen  0.25 [0.25, 0.25] n=3  0.96 [0.86, 1.00]",
        "  caught number 0/2 (0%, 95% CI 0-66%)",
        "Answers, keyword tests and the judge use 3 cases (case-3, case-7, topic-12), the first 3 ...",
        "Pipeline run has finished in 1m45s.",
    ]
    same_shape = [
        "cell     correctness_0to1    hit_rate@5",
        "local/qwen  1.00 [1.00, 1.00] n=3  0.5 [0.1, 0.9]",
        "  caught number 2/2 (100%, 95% CI 34-100%)",
        "Answers, keyword tests and the judge use 3 cases (case-3, case-7, topic-12), the first 3 ...",
        "Pipeline run has finished in 12.5s.",
    ]
    assert structure(shown) == structure(same_shape)
    for planted in (
        {0: "cell  correctness_0to1  hit_rate@10"},  # a column renamed
        {3: "Answers, keyword tests and the judge use 3 cases (case-3, case-8, topic-12), the first 3 ..."},
        {2: "  caught entity 0/2 (0%, 95% CI 0-66%)"},  # another planted kind sampled
    ):
        changed = [planted.get(i, line) for i, line in enumerate(shown)]
        assert structure(changed) != structure(shown)
    assert structure(shown[:-1]) != structure(shown)  # a line gone
