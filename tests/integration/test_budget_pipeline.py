"""The spend cap in real ZenML runs, reader and judge on the loopback fake OpenAI server (which counts every
request it gets).

One cell answers 4 cases and a judge grades them on one rubric: a plan of 8 calls. The server fails the first
3 requests (retried, each retry one more call sent), so a run capped at 9 calls is cut mid-way: the reader's
7 calls and 2 verdicts go out, the last 2 verdicts are never sent. The run says why its cell is incomplete,
its gate fails, and a rerun with a higher cap sends only the 2 missing verdicts. A cap below the plan is
refused before anything runs.
"""

import pytest

from cli.budget import OVER_BUDGET_EXIT_CODE
from tests.projects import (
    newest_run,
    printed,
    right_keyword_reply,
    serving_fake_openai,
    write_one_cell_project,
)


def newest_run_id() -> str | None:
    """The newest benchmark run's id, None before any (a test run alone starts from an empty store)."""
    try:
        return str(newest_run().id)
    except KeyError:
        return None


@pytest.fixture
def project(tmp_path, monkeypatch):
    with serving_fake_openai(tmp_path, monkeypatch, right_keyword_reply) as server:
        write_one_cell_project(tmp_path, server.base_url)
        yield server


def test_a_plan_over_the_cap_is_refused_before_anything_runs(project):
    before = newest_run_id()
    code, out, err = printed("--set=budget.max_calls=5")
    assert code == 2 and project.request_count == 0
    assert "over its budget (max_calls 5)" in err and "8 calls planned, 3 over budget.max_calls 5" in err
    assert "lower generation.sample_size" in err
    assert newest_run_id() == before  # no run was started
    code, out, _ = printed("--dry-run", "--set=budget.max_calls=5")
    # the dry run says so in words and in its documented exit code, which a CI job can act on
    assert code == OVER_BUDGET_EXIT_CODE == 3 and "Budget (max_calls 5): OVER, a real run is refused" in out
    code, out, _ = printed("--dry-run", "--set=budget.max_calls=8")
    assert code == 0 and "Budget (max_calls 8): within" in out


def test_a_cap_cuts_the_run_sends_nothing_past_it_and_a_higher_cap_pays_only_for_the_rest(project):
    project.inject("server_error", "server_error", "server_error")  # 3 retries the plan does not count
    code, out, err = printed("--set=budget.max_calls=9")
    assert code != 0  # the gate fails closed on an incomplete cell
    assert project.request_count == 9  # 4 answers + 3 retries, then 2 of the 4 verdicts
    first = newest_run()
    (reason,) = first.run_metadata["incomplete_cells"].values()
    assert "the spend cap stopped 2 judge verdict(s)" in reason and "raise the config's budget" in reason
    assert first.run_metadata["gate_status"] == "incomplete"
    statuses = {name: step.status.value for name, step in first.steps.items()}
    assert "INCOMPLETE: the spend cap stopped 2 judge verdict(s)" in out  # the summary's warnings

    code, out, err = printed("--set=budget.max_calls=20")
    assert code == 0, out + err
    assert project.request_count == 9 + 2  # only the 2 verdicts the cap stopped
    second = newest_run()
    assert not second.run_metadata.get("incomplete_cells")
    reran = {name: step.status.value for name, step in second.steps.items()}
    answer = [name for name in reran if name.startswith("answer_")]
    judge = [name for name in reran if name.startswith("judge_")]
    assert [reran[name] for name in answer] == ["cached"]  # its calls all went out in the first run
    assert [reran[name] for name in judge] == ["completed"] and statuses[judge[0]] == "completed"


def test_the_judge_cards_calls_count_against_the_cap_before_the_run(project):
    """The judge card's calls are not in the plan's rows (the dry run lists their at-most apart), but the
    run charges them: the budget check counts them, so a cap that leaves them no room is refused."""
    card = "--set=evaluation.judge_check={cases: 2}"  # 2 cases, 6 calls each at most: 12 beside the 8
    code, out, _ = printed("--dry-run", card, "--set=budget.max_calls=10")
    assert code == OVER_BUDGET_EXIT_CODE and "Judge card: at most 12 calls for each of 1 judge(s)" in out
    assert "20 calls planned, 10 over budget.max_calls 10" in out
    code, out, _ = printed("--dry-run", card, "--set=budget.max_calls=20")
    assert "within; the plan's 20 new calls (12 of them the judge card's and written references'" in out
    code, _, err = printed(card, "--set=budget.max_calls=10")
    assert code == 2 and "20 calls planned" in err and project.request_count == 0
