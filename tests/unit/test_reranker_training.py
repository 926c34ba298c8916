"""The reranker-training core without a model: the eval cases kept out of training, inverse-cloze
questions, the `trained:<name>` value, the label, and the config section's checks."""

import pytest

from ragbench.config.model import ConfigError, load_config
from ragbench.inputs.chunking import Chunk
from ragbench.inputs.eval_cases import EvalCase
from ragbench.models.trained import TrainedReranker, parse_trained
from ragbench.retrieval.rerank import RerankerChoice
from ragbench.training.pairs import _without_sentence
from ragbench.training.questions import TrainingQuestion, cloze_questions, leaks, without_leaks

CASES = [
    EvalCase(
        id="walrus",
        question="What does the walrus operator assign inside an expression?",
        reference_answer="It binds a name to the value of an expression as part of a larger expression.",
    ),
    EvalCase(id="gil", question="Why can only one thread run Python bytecode at a time?"),
]


def question(text: str, origin: str = "generator") -> TrainingQuestion:
    return TrainingQuestion(question=text, chunk=0, origin=origin)


def test_a_question_resembling_an_eval_question_or_reference_is_dropped_with_the_reason() -> None:
    kept, dropped = without_leaks(
        [
            question("What does the walrus operator assign inside an expression?"),  # the eval question
            question("what does the Walrus operator assign, inside an expression"),  # reworded casing
            question(
                "It binds a name to the value of an expression as part of a larger expression.", "cloze"
            ),
            question("Which statement leaves the innermost loop?"),
        ],
        CASES,
    )
    assert [q.question for q in kept] == ["Which statement leaves the innermost loop?"]
    assert len(dropped) == 3 and "resembles eval text" in dropped[0]
    assert leaks("How do I open a file for reading?", [c.question for c in CASES]) is None


def test_cloze_takes_the_longest_sentence_of_a_chunk_with_three_and_the_positive_loses_it() -> None:
    text = (
        "The first sentence is here and it is long enough. The second sentence is the longest one of all "
        "three sentences in this chunk. A third sentence closes the chunk for good."
    )
    chunks = [
        Chunk(text=text, source="a.md", start_index=0),
        Chunk(text="Only one sentence here, however long it may be.", source="b.md", start_index=0),
    ]
    (found,) = cloze_questions(chunks)
    assert found.chunk == 0 and found.origin == "cloze" and found.question.startswith("The second sentence")
    rest = _without_sentence(text, found.question)
    assert found.question not in rest and rest.startswith("The first sentence") and rest.endswith("for good.")


def test_trained_values_parse_and_bad_ones_say_how_to_write_them() -> None:
    assert parse_trained("trained:docs") == ("docs", None)
    assert parse_trained("trained:docs@3") == ("docs", "3")
    assert parse_trained("colbert-ir/colbertv2.0") is None
    with pytest.raises(ValueError, match="write trained:<name> or trained:<name>@<version>"):
        parse_trained("trained:two words")


def test_a_trained_checkpoint_is_labelled_with_what_it_learned_from_never_as_colbert() -> None:
    trained = TrainedReranker(
        name="docs",
        knowledge_base="pydoc_topics",
        training_pairs=812,
        generator_questions=280,
        cloze_questions=532,
        training_data_fingerprint="f",
        chunk_set_fingerprint="c",
        held_out_cases=["walrus"],
        validation_sources=[],
        recipe={},
        log={"validation_curve": [(0, 0.5), (40, 0.7)], "validation_questions": 20},
    )
    assert trained.label == "trained locally on 812 synthetic pairs from pydoc_topics"
    assert trained.summary()["validation_mrr_best"] == 0.7
    choice = RerankerChoice(
        requested="trained:docs",
        used="trained:docs@2",
        is_standin=False,
        reason="artifact reranker-docs version 2",
        trained_artifact="id",
        trained_label=trained.label,
    )
    assert choice.label == "trained:docs@2 (trained locally on 812 synthetic pairs from pydoc_topics)"
    assert choice.identity() == {"used": "trained:docs@2"}  # a new version re-encodes, the same one never


def test_the_section_is_checked_before_anything_runs(tmp_path) -> None:
    with pytest.raises(ConfigError, match="reranker_training: chunk overlap"):
        load_config(None, ["reranker_training.chunk_size=32", "reranker_training.chunk_overlap=40"])
    with pytest.raises(ConfigError, match="reranker_training"):
        load_config(None, ["reranker_training.validation_share=1.5"])
    config = load_config(None, [])
    assert config.trained_reranker_name == "python-reference-default"
    assert config.section_chunking(config.reranker_training) == (256, 26)


def test_a_dry_run_says_what_training_would_call_and_calls_nothing(capsys) -> None:
    import run

    assert run.main(["train-reranker", "--dry-run", "--set", "reranker_training.chunks=7"]) == 0
    out = capsys.readouterr().out
    assert "up to 7 call(s) of local/qwen2.5-coder-1.5b-instruct writing one question per chunk of 256" in out
    assert "Eval cases held out: those of " in out


def test_a_follow_ups_earlier_user_turns_are_held_out_too():
    follow_up = EvalCase.model_validate(
        {
            "id": "dict-get",
            "history": [
                {"role": "user", "content": "How do I look a key up in a dictionary without an exception?"},
                {"role": "assistant", "content": "Call its get method."},
            ],
            "question": "And what comes back then?",
        }
    )
    kept, dropped = without_leaks(
        [
            question("How can I look a key up in a dictionary without an exception?"),
            question("What is pass?"),
        ],
        [follow_up],
    )
    assert [q.question for q in kept] == ["What is pass?"] and len(dropped) == 1
