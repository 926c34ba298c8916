"""The judge measured against the keyword tests, a second judge and human labels."""

from ragbench.analysis.judge_reliability import JudgedCase, judge_reliability


def judged(case: str, score: int, judge: str = "j1", failures=(), tested=True, answers="a1"):
    return JudgedCase(
        cell=f"cell-{judge}",
        answer_set=answers,
        judge=judge,
        case_id=case,
        correctness=score,
        keyword_failures=list(failures),
        keyword_tested=tested,
    )


def test_keyword_agreement_counts_decisive_scores_and_lists_contradictions():
    cases = [
        judged("right", 5),  # agrees: high score, no failure
        judged("wrong", 1, failures=["good_answers: digits"]),  # agrees
        judged("praised-but-failing", 5, failures=["bad_answers: does not say"]),  # contradiction
        judged("damned-but-passing", 1),  # contradiction
        judged("undecided", 3),  # left out: 3 decides nothing
        judged("untested", 5, tested=False),  # left out: no keyword test
    ]
    keyword = judge_reliability(cases).keyword
    assert (keyword.compared, keyword.agreeing) == (4, 2)
    assert [(c.case_id, c.keyword) for c in keyword.contradictions] == [
        ("praised-but-failing", "failed bad_answers: does not say"),
        ("damned-but-passing", "passed every test"),
    ]


def test_two_judges_of_the_same_answers_get_a_weighted_kappa():
    scores = {"q1": 5, "q2": 1, "q3": 4, "q4": 2, "q5": 5}
    same = [judged(c, s, "j1") for c, s in scores.items()] + [judged(c, s, "j2") for c, s in scores.items()]
    (pair,) = judge_reliability(same).judge_pairs
    assert (pair.first, pair.second, pair.cases, pair.kappa) == ("j1", "j2", 5, 1.0)
    flipped = [judged(c, s, "j1") for c, s in scores.items()] + [
        judged(c, 6 - s, "j2") for c, s in scores.items()
    ]
    assert judge_reliability(flipped).judge_pairs[0].kappa < 0
    other_answers = [judged("q1", 5, "j1", answers="a1"), judged("q1", 5, "j2", answers="a2")]
    assert judge_reliability(other_answers).judge_pairs == []  # different answers: nothing to agree on


def test_human_labels_give_kappa_exact_agreement_and_a_confusion_table():
    reliability = judge_reliability([], labelled={"j1": [(5, 5), (1, 1), (2, 4)], "j2": []})
    (human,) = reliability.human  # a judge with no labelled verdict is not reported
    assert human.cases == 3 and human.exact == 2 / 3
    assert human.confusion[1][3] == 1  # the person said 2, the judge 4
    assert sum(map(sum, human.confusion)) == 3
    assert "vs human labels" in reliability.lines()[-1]


def test_self_consistency_counts_answers_whose_score_changed():
    sampled = {"j1": {"correctness": [[5, 5, 5], [5, 3, 4], [1, 1]], "faithfulness": [[4]]}}
    (consistency,) = judge_reliability([], sampled).consistency  # one sample only: nothing to compare
    assert (consistency.criterion, consistency.answers, consistency.samples) == ("correctness", 3, 3)
    assert consistency.changed == 1 / 3 and consistency.mean_range == 2 / 3
    assert judge_reliability([]) is None
