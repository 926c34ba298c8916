"""The review page in a real browser: a person labels answers with the keyboard, the judges' verdicts show
only after each label, a note is written, and the labels survive a reload and a restart of the server; an
answer that holds markup shows as text and its script never runs. The answer comes before the passages,
which are folded, with the spans the answer shares with them marked (as text, whatever they hold)."""

import json
import shutil

import pytest

from ragbench.inputs.conversation import Turn
from ragbench.review.labels import LabelStore
from ragbench.review.queue import ReviewItem, ordered
from ragbench.review.server import PAGE_ORDERS, ReviewServer, ReviewSession
from ragbench.scoring.rubrics import JudgeInput

CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)
TIMEOUT = 30_000  # ms: a loaded two-core machine can be slow to start chromium and to lay a page out
PLANTED = "<script>window.pwned=1</script><b>bold</b>"
SEED = 5
LABELLED = 10
NOTE = "needs 2 sources, not one"  # digits and key letters typed in the note must not label or move


def review_items() -> list[ReviewItem]:
    items = []
    for i in range(12):
        answer = f"Answer number {i}: the steeping time is {i + 1} minutes."
        verdicts = {"judge-a": 1 + i % 5}
        if i == 0:  # the planted markup, where two judges disagree: first under the default order
            answer = f"Steep it for three minutes. {PLANTED}"
            verdicts = {"judge-a": 1, "judge-b": 5}
        elif i % 4 == 0:
            verdicts["judge-b"] = 1 + (i + 2) % 5
        items.append(
            ReviewItem(
                rubric="correctness",
                criterion="correctness",
                criterion_label="Is the answer correct?",
                scale="1-5",
                input=JudgeInput(
                    case_id=f"case-{i:02d}",
                    question=f"How long should tea {i} steep?",
                    answer=answer,
                    reference_answer="Three minutes.",
                    contexts=[f"Tea {i} is steeped for three minutes."],
                ),
                sources=[f"tea-{i}.md"],
                verdicts=verdicts,
                reasoning={judge: f"{judge} read the passage" for judge in verdicts},
            )
        )
    return items


# A typical item: the answer draws one run of words from the second of three long passages.
SHARED = "for two to three minutes in water at about 80 degrees Celsius"
LAYOUT_ANSWER = (
    f"Green tea should steep {SHARED}. Boiling water scorches the leaves and makes the cup bitter; "
    "a second infusion of the same leaves can take a minute longer."
)
LAYOUT_PASSAGES = [
    (
        "green-tea.md",
        "Green tea is made from the leaves of Camellia sinensis that are not oxidised after picking. "
        "Most of it comes from China and Japan, where it is pan-fired or steamed soon after the harvest "
        "to keep its colour. Sencha, gyokuro, matcha and longjing are among the best known kinds. " * 4,
    ),
    (
        "brewing-guide.md#temperature",
        "Weigh about two grams of leaves per cup and warm the pot first. " * 3
        + f"Steep green tea {SHARED}, cooler for the finest shaded leaves. "
        + "Water straight off the boil scalds them and brings out tannins. " * 3,
    ),
    (
        "history.md",
        "Tea drinking spread from southern China along trade routes to Korea and Japan, and reached Europe "
        "in the seventeenth century through Portuguese and Dutch merchants. " * 5,
    ),
]
# An item whose passage holds markup inside the span it shares with the answer (in another case, punctuated).
MARKUP_MARKED = f"brew it HOT, {PLANTED} then strain the leaves"
MARKUP_PASSAGE = f"Some say: {MARKUP_MARKED}, and drink it."


def layout_items() -> list[ReviewItem]:
    def item(case_id, question, answer, passages, verdicts):
        return ReviewItem(
            rubric="correctness",
            criterion="correctness",
            criterion_label="Is the answer correct?",
            scale="1-5",
            input=JudgeInput(
                case_id=case_id,
                question=question,
                answer=answer,
                reference_answer="Two to three minutes at 70-80 degrees Celsius; never boiling water.",
                contexts=[text for _, text in passages],
            ),
            sources=[source for source, _ in passages],
            verdicts=verdicts,
            reasoning={judge: f"{judge} read the passage" for judge in verdicts},
        )

    return [
        item(
            "green-tea",
            "How long should green tea steep, and how hot should the water be?",
            LAYOUT_ANSWER,
            LAYOUT_PASSAGES,
            {"judge-a": 1, "judge-b": 5},  # a disagreement: first under the default order
        ),
        item(
            "markup",
            "How is the tea brewed?",
            f"You brew it hot {PLANTED} then strain the leaves.",
            [("notes.md", MARKUP_PASSAGE), ("other.md", "Nothing here.")],
            {"judge-a": 3},
        ),
    ]


FIRST_TURN = f"How do I brew green tea? {PLANTED}"
GENERATED_TURN = f"Steep it briefly. {PLANTED}"  # what the cell's reader wrote: markup, shown as text


def conversation_items() -> list[ReviewItem]:
    """Three follow-ups: after a turn the cell generated, after one given in the case, and one alone."""
    histories = {
        "generated": [
            Turn(role="user", content=FIRST_TURN),
            Turn(role="assistant", content=GENERATED_TURN, generate=True),
        ],
        "given": [Turn(role="user", content=FIRST_TURN), Turn(role="assistant", content="Three minutes.")],
        "alone": [],
    }
    return [
        ReviewItem(
            rubric="correctness",
            criterion="correctness",
            criterion_label="Is the answer correct?",
            scale="1-5",
            input=JudgeInput(
                case_id=case_id,
                question=f"And how hot, {case_id}?",
                history=history,
                answer=f"About 80 degrees ({case_id}).",
                contexts=["Green tea is steeped at 80 degrees."],
            ),
            sources=["tea.md"],
            verdicts={"judge-a": 1 + i},
        )
        for i, (case_id, history) in enumerate(histories.items())
    ]


HISTORY_SHOWN = {  # case -> the turns the page shows, each marked whose it is
    "generated": [f"user: {FIRST_TURN}", f"assistant (generated by the system under test): {GENERATED_TURN}"],
    "given": [f"user: {FIRST_TURN}", "assistant (given in the case): Three minutes."],
    "alone": [],
}


def serve(items: list[ReviewItem], path) -> ReviewServer:
    server = ReviewServer(ReviewSession(items, LabelStore(path), title="tea review", seed=SEED), port=0)
    server.start()
    return server


def stop(server: ReviewServer) -> None:
    server.shutdown()
    server.server_close()


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium on this machine and set-up could not install it (`apt-get install chromium` "
    "as root on Debian; see docs/project/tests-and-benchmarks.md)",
)
def test_a_person_labels_with_the_keyboard_and_the_labels_survive_a_reload_and_a_restart(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    items = review_items()
    by_answer = {item.input.answer: item for item in items}
    queue = ordered(items, "disagreement", SEED)  # the page's default order
    assert queue[0].input.answer.endswith(PLANTED)
    labels_path = tmp_path / "labels.jsonl"
    server = serve(items, labels_path)
    errors: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                page.set_default_timeout(TIMEOUT)
                page.on("pageerror", lambda error: errors.append(str(error)))
                page.goto(server.url)
                progress, status = page.locator("#progress"), page.locator("#status")
                answer, note = page.locator("#answer"), page.locator("#note")
                revealed = page.locator("#revealed")
                expect(page.locator("#title")).to_have_text("tea review", timeout=TIMEOUT)
                # blinding: the page was sent no verdict at all
                assert page.evaluate("state.items.some((item) => 'verdicts' in item)") is False

                given: dict[str, int] = {}
                for position in range(LABELLED):
                    expect(progress).to_have_text(
                        f"item {position + 1} of 12 ({position} labelled)", timeout=TIMEOUT
                    )
                    expect(status).to_have_text("not labelled", timeout=TIMEOUT)
                    expect(revealed).to_be_hidden(timeout=TIMEOUT)  # blind until labelled
                    shown = answer.text_content()
                    item = by_answer.get(shown)
                    assert item is not None, f"#answer shows {shown!r}, not an answer of the queue"
                    assert item.key == queue[position].key  # the page's order is the server's
                    value = 1 + (position * 3) % 5
                    if position == 3:  # a note: n, type, Escape, then the score
                        page.keyboard.press("n")
                        expect(note).to_be_focused(timeout=TIMEOUT)
                        page.keyboard.type(NOTE)
                        expect(note).to_have_value(NOTE, timeout=TIMEOUT)  # the "n" was not typed
                        expect(status).to_have_text("not labelled", timeout=TIMEOUT)
                        expect(progress).to_contain_text(f"item {position + 1} of 12", timeout=TIMEOUT)
                        page.keyboard.press("Escape")
                        expect(note).not_to_be_focused(timeout=TIMEOUT)
                    page.keyboard.press(str(value))
                    given[item.key] = value
                    expect(status).to_have_text(f"saved: {value} / 5", timeout=TIMEOUT)
                    expect(revealed).to_be_visible(timeout=TIMEOUT)
                    for judge, score in item.verdicts.items():
                        expect(revealed).to_contain_text(f"{judge}: {score} / 5", timeout=TIMEOUT)
                        expect(revealed).to_contain_text(f"{judge} read the passage", timeout=TIMEOUT)
                    expect(progress).to_contain_text(f"({position + 1} labelled)", timeout=TIMEOUT)
                    page.keyboard.press(("Enter", "ArrowRight", "s")[position % 3])
                expect(progress).to_have_text(
                    f"item {LABELLED + 1} of 12 ({LABELLED} labelled)", timeout=TIMEOUT
                )

                stored = [json.loads(line) for line in labels_path.read_text().splitlines()]
                assert len(stored) == LABELLED
                keys = [f"{s['case_id']}|{s['answer_sha']}|{s['rubric']}|{s['criterion']}" for s in stored]
                assert dict(zip(keys, (s["value"] for s in stored), strict=True)) == given
                notes = {s["case_id"]: s["note"] for s in stored if s["note"]}
                assert notes == {queue[3].input.case_id: NOTE}

                page.reload()
                check_labels_kept(page, expect, queue, given)
                for position in range(LABELLED - 2, -1, -1):  # back through every label to the first
                    page.keyboard.press("ArrowLeft" if position % 2 else "b")
                    expect(progress).to_have_text(
                        f"item {position + 1} of 12 ({LABELLED} labelled)", timeout=TIMEOUT
                    )
                    label = f"your label: {given[queue[position].key]} / 5"
                    expect(status).to_have_text(label, timeout=TIMEOUT)
                    expect(note).to_have_value(NOTE if position == 3 else "", timeout=TIMEOUT)
                    expect(revealed).to_be_visible(timeout=TIMEOUT)
                expect(answer).to_have_text(f"Steep it for three minutes. {PLANTED}", timeout=TIMEOUT)
                assert answer.locator("b, script").count() == 0  # text, not elements
                assert page.evaluate("typeof window.pwned") == "undefined"
                expect(revealed).to_contain_text("judge-a: 1 / 5", timeout=TIMEOUT)
                expect(revealed).to_contain_text("judge-b: 5 / 5", timeout=TIMEOUT)

                stop(server)
                server = serve(items, labels_path)  # a restart: a new store reads the same file
                page.goto(server.url)
                check_labels_kept(page, expect, queue, given)
                page.goto(server.url + "?order=random")
                expect(page.locator("#order")).to_have_value("random", timeout=TIMEOUT)
                expect(progress).to_contain_text(f"({LABELLED} labelled)", timeout=TIMEOUT)
                assert page.evaluate("typeof window.pwned") == "undefined"
                page.screenshot(path=str(tmp_path / "review.png"))
            finally:
                browser.close()
    finally:
        stop(server)
    assert errors == []
    assert len(labels_path.read_text().splitlines()) == LABELLED  # reloads and a restart wrote nothing


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (see the test above)")
def test_the_answer_comes_first_and_the_passages_are_folded_with_the_spans_it_shares_marked(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    items = layout_items()
    queue = ordered(items, "disagreement", SEED)
    assert [item.input.case_id for item in queue] == ["green-tea", "markup"]
    server = serve(items, tmp_path / "labels.jsonl")
    errors: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.set_default_timeout(TIMEOUT)
                page.on("pageerror", lambda error: errors.append(str(error)))
                page.goto(server.url)
                answer, progress = page.locator("#answer"), page.locator("#progress")
                folds = page.locator("#passages details")
                expect(answer).to_have_text(LAYOUT_ANSWER, timeout=TIMEOUT)
                expect(folds).to_have_count(3, timeout=TIMEOUT)

                # question, answer, reference and the scale come first, all in the window before any scrolling
                def bottom(selector: str) -> float:
                    box = page.locator(selector).bounding_box()
                    assert box is not None, f"{selector} is not laid out"
                    return box["y"] + box["height"]

                assert page.evaluate("window.scrollY") == 0
                first_passage = folds.first.bounding_box()
                assert first_passage is not None
                assert bottom("#answer") <= first_passage["y"]
                assert bottom("#question") <= page.locator("#answer").bounding_box()["y"]
                assert bottom("#answer") <= page.locator("#reference").bounding_box()["y"]
                assert bottom("#reference") <= page.locator("#scale").bounding_box()["y"]
                assert bottom("#scale") <= 800
                expect(page.locator("#scale button")).to_have_text(["1", "2", "3", "4", "5"], timeout=TIMEOUT)

                # folded at load, each with its source; the shared run is marked in the passage that holds it
                assert open_folds(page) == [False, False, False]
                summaries = folds.locator("summary")
                for n, (source, _) in enumerate(LAYOUT_PASSAGES):
                    expect(summaries.nth(n)).to_contain_text(f"[{n + 1}] {source}", timeout=TIMEOUT)
                mark = folds.nth(1).locator("mark")
                expect(mark).to_have_text([SHARED], timeout=TIMEOUT)
                expect(folds.nth(0).locator("mark")).to_have_count(0, timeout=TIMEOUT)
                expect(folds.nth(2).locator("mark")).to_have_count(0, timeout=TIMEOUT)
                expect(summaries.nth(1)).to_contain_text("1 marked span", timeout=TIMEOUT)
                expect(summaries.nth(0)).not_to_contain_text("marked", timeout=TIMEOUT)
                expect(page.locator("#cites")).to_contain_text("1 span with passage [2]", timeout=TIMEOUT)
                expect(mark).to_be_hidden(timeout=TIMEOUT)

                # m: to the marked span (its passage unfolds, the others stay folded); o: all, then none
                page.keyboard.press("m")
                expect(mark).to_be_visible(timeout=TIMEOUT)
                expect(mark).to_be_in_viewport(timeout=TIMEOUT)
                expect(mark).to_have_class("current", timeout=TIMEOUT)
                assert open_folds(page) == [False, True, False]
                page.keyboard.press("o")
                expect(folds.nth(2).locator(".text")).to_be_visible(timeout=TIMEOUT)
                assert open_folds(page) == [True, True, True]
                page.keyboard.press("o")
                expect(mark).to_be_hidden(timeout=TIMEOUT)
                assert open_folds(page) == [False, False, False]
                # a click on the summary line, and Enter on a focused one, unfold it too (and do not move on)
                summaries.nth(1).click()
                expect(mark).to_be_visible(timeout=TIMEOUT)
                summaries.nth(1).click()
                expect(mark).to_be_hidden(timeout=TIMEOUT)
                summaries.nth(1).focus()
                page.keyboard.press("Enter")
                expect(mark).to_be_visible(timeout=TIMEOUT)
                expect(progress).to_have_text("item 1 of 2 (0 labelled)", timeout=TIMEOUT)
                page.evaluate("document.activeElement.blur()")

                # a score by its button; the label leaves the passage the person unfolded open
                page.locator("#scale button", has_text="4").click()
                expect(page.locator("#status")).to_have_text("saved: 4 / 5", timeout=TIMEOUT)
                expect(page.locator("#revealed")).to_contain_text("judge-b: 5 / 5", timeout=TIMEOUT)
                expect(page.locator("#scale button[aria-pressed=true]")).to_have_text("4", timeout=TIMEOUT)
                assert open_folds(page) == [False, True, False]
                page.keyboard.press("Enter")  # the click left no focus on the button: Enter moves on
                expect(progress).to_have_text("item 2 of 2 (1 labelled)", timeout=TIMEOUT)

                # markup inside a marked span shows as text, and its script never runs
                assert open_folds(page) == [False, False]
                marked = folds.nth(0).locator("mark")
                expect(marked).to_have_text([MARKUP_MARKED], timeout=TIMEOUT)
                expect(folds.nth(1).locator("mark")).to_have_count(0, timeout=TIMEOUT)
                page.keyboard.press("m")
                expect(marked).to_be_visible(timeout=TIMEOUT)
                expect(folds.nth(0).locator(".text")).to_have_text(MARKUP_PASSAGE, timeout=TIMEOUT)
                assert page.locator("#passages script, #passages b, #answer script, #answer b").count() == 0
                assert page.evaluate("typeof window.pwned") == "undefined"
            finally:
                browser.close()
    finally:
        stop(server)
    assert errors == []


def open_folds(page) -> list[bool]:
    return page.evaluate("Array.from(document.querySelectorAll('#passages details'), (d) => d.open)")


def check_labels_kept(page, expect, queue: list[ReviewItem], given: dict[str, int]) -> None:
    """After a reload: the page opens on the first unlabelled item, counts the labels, goes back to the
    last labelled one with its label and verdicts, and the agreement table counts every label."""
    progress = page.locator("#progress")
    expect(progress).to_have_text(f"item {LABELLED + 1} of 12 ({LABELLED} labelled)", timeout=TIMEOUT)
    expect(page.locator("#status")).to_have_text("not labelled", timeout=TIMEOUT)
    expect(page.locator("#revealed")).to_be_hidden(timeout=TIMEOUT)
    labelled = queue[:LABELLED]
    judge_a = page.locator("#agreement tr", has=page.locator("td", has_text="judge-a"))
    expect(judge_a.locator("td").nth(2)).to_have_text(str(LABELLED), timeout=TIMEOUT)
    judge_b = page.locator("#agreement tr", has=page.locator("td", has_text="judge-b"))
    with_b = sum("judge-b" in item.verdicts for item in labelled)
    expect(judge_b.locator("td").nth(2)).to_have_text(str(with_b), timeout=TIMEOUT)
    page.keyboard.press("b")
    expect(progress).to_have_text(f"item {LABELLED} of 12 ({LABELLED} labelled)", timeout=TIMEOUT)
    last = labelled[-1]
    expect(page.locator("#status")).to_have_text(f"your label: {given[last.key]} / 5", timeout=TIMEOUT)
    expect(page.locator("#answer")).to_have_text(last.input.answer, timeout=TIMEOUT)
    expect(page.locator("#revealed")).to_contain_text(
        f"judge-a: {last.verdicts['judge-a']} / 5", timeout=TIMEOUT
    )


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (see the first test)")
def test_every_order_shows_each_items_conversation_marking_the_generated_turns(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    items = conversation_items()
    server = serve(items, tmp_path / "labels.jsonl")
    errors: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.set_default_timeout(TIMEOUT)
                page.on("pageerror", lambda error: errors.append(str(error)))
                for order in PAGE_ORDERS:  # the queue's orders and the sample orders
                    page.goto(f"{server.url}?order={order}")
                    expect(page.locator("#order")).to_have_value(order, timeout=TIMEOUT)
                    seen = []
                    for position in range(len(items)):
                        expect(page.locator("#progress")).to_contain_text(
                            f"item {position + 1} of {len(items)}", timeout=TIMEOUT
                        )
                        case_id = page.locator("#answer").text_content().split("(")[1].rstrip(").")
                        turns = page.locator("#history .turn")
                        if HISTORY_SHOWN[case_id]:
                            expect(page.locator("#history-block")).to_be_visible(timeout=TIMEOUT)
                            expect(turns).to_have_text(HISTORY_SHOWN[case_id], timeout=TIMEOUT)
                        else:
                            expect(page.locator("#history-block")).to_be_hidden(timeout=TIMEOUT)
                        seen.append(case_id)
                        page.keyboard.press("ArrowRight")
                    assert sorted(seen) == sorted(HISTORY_SHOWN), order
                    # the markup in the turns is text: no element made, no script run
                    assert (
                        page.evaluate("document.querySelectorAll('#history b, #history script').length") == 0
                    )
                    assert page.evaluate("window.pwned") is None
            finally:
                browser.close()
    finally:
        stop(server)
    assert errors == []
