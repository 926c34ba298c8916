"""The judge measured against the keyword tests, a second judge and human labels."""

from ragbench.judge_reliability import JudgedCase, judge_reliability


def judged(case: str, score: int, judge: str = "j1", failures=(), tested=True, human=None, answers="a1"):
    return JudgedCase(
        cell=f"cell-{judge}",
        answer_set=answers,
        judge=judge,
        case_id=case,
        correctness=score,
        keyword_failures=list(failures),
        keyword_tested=tested,
        human=human,
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
    items = [judged("q1", 5, human=5), judged("q2", 1, human=1), judged("q3", 4, human=2), judged("q4", 2)]
    (human,) = judge_reliability(items).human
    assert human.cases == 3 and human.exact == 2 / 3
    assert human.confusion[1][3] == 1  # the human said 2, the judge 4
    assert sum(map(sum, human.confusion)) == 3
    assert "vs human labels" in judge_reliability(items).lines()[-1]
