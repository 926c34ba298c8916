"""Report rendering: escaping of untrusted text, and the terminal summary."""

from ragbench.report import html_page, rows_to_csv, rows_to_html_table, rows_to_text, summary_rows

HOSTILE = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'


def test_every_untrusted_value_is_escaped_in_html() -> None:
    rows = [{"cell": HOSTILE, "answer": HOSTILE, "score": 0.5}]
    page = html_page(HOSTILE, [rows_to_html_table(rows)], notes=[HOSTILE], warnings=[HOSTILE])
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;" in page and "&amp;" in page
    assert page.count("&lt;script&gt;") == 6  # title, heading, warning, note and both table cells


def test_csv_round_trips_commas_and_quotes() -> None:
    text = rows_to_csv([{"cell": 'a,"b"', "mrr": 0.5}])
    assert text.splitlines() == ["cell,mrr", '"a,""b""",0.5']


def test_summary_shows_how_many_cases_a_keyword_rate_rests_on() -> None:
    csv_row = {
        "cell": "cs128_x",
        "reranker": "off",
        "chunks": "1173",
        "failure_rate@3": "0.02",
        "mrr": "0.7996",
        "fail_bad_answers": "1.0",
        "fail_bad_answers_cases": "1",
        "fail_bad_first_words": "",
        "fail_bad_first_words_cases": "0",
        "fail_good_answers": "0.3333333333333333",
        "fail_good_answers_cases": "3",
        "latency_mean_s": "4.922",
    }
    (summary,) = summary_rows([csv_row])
    assert list(summary) == [
        "cell",
        "reranker",
        "failure_rate@3",
        "mrr",
        "fail_bad_answers",
        "fail_bad_first_words",
        "fail_good_answers",
        "latency_mean_s",
    ]
    assert summary["fail_bad_answers"] == "1.00 (n=1)"
    assert summary["fail_good_answers"] == "0.33 (n=3)"
    assert summary["fail_bad_first_words"] == ""  # no case took part: no rate
    assert summary["mrr"] == 0.7996
    assert "0.3333333333333333" not in rows_to_text([summary])
