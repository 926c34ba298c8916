"""The store's answers are served from the memo only while the local SQLite store is provably unchanged: on a
real SQLite file (ZenML's is one), any committed write, a write while the question was asked, WAL mode, a
server or a store set by variables means the store is asked."""

import os
import sqlite3
from pathlib import Path

import pytest

import cli.launch
from cli import store_memo
from ragbench.config.plan import PreviousSpend


@pytest.fixture
def database(tmp_path, monkeypatch) -> Path:
    """A ZenML global config naming a local SQLite store (with a table), and no store to open."""
    folder = tmp_path / "zenml"
    path = folder / "local_stores" / "default_zen_store" / "zenml.db"
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as connection:
        connection.execute("create table pipeline_run (name text)")
    connection.close()
    (folder / "config.yaml").write_text(
        f"store:\n  type: sql\n  url: sqlite:///{path}\n  secrets_store:\n    type: sql\n"
    )
    monkeypatch.setenv("ZENML_CONFIG_PATH", str(folder))
    for name in [name for name in os.environ if name.startswith("ZENML_STORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(cli.launch, "open_store", lambda: None)
    return path


def write(path: Path, statement: str = "insert into pipeline_run values ('run')") -> None:
    connection = sqlite3.connect(path)
    with connection:
        connection.execute(statement)
    connection.close()


class Asker:
    """An answer to remember, and how often the store was asked for it."""

    def __init__(self, answer, side_effect=None) -> None:
        self.answer, self.asked, self.side_effect = answer, 0, side_effect

    def __call__(self):
        self.asked += 1
        if self.side_effect is not None:
            self.side_effect()
        return self.answer


def ask(question: Asker, key: str = "k") -> set[str]:
    return store_memo.remembered("finished_steps", key, question, dump=sorted, load=set)


def test_an_answer_is_served_until_the_database_changes(database):
    question = Asker({"chunk_a", "index_b"})
    assert ask(question) == {"chunk_a", "index_b"} and question.asked == 1
    assert ask(question) == {"chunk_a", "index_b"} and question.asked == 1  # the memo's
    assert ask(question, "other") and question.asked == 2  # another key is asked
    write(database)  # another process (a schedule, another client) ran
    assert ask(question) == {"chunk_a", "index_b"} and question.asked == 3
    write(database, "update pipeline_run set name = 'renamed'")  # same size, a write all the same
    assert ask(question) and question.asked == 4
    config = database.parents[2] / "config.yaml"
    config.write_text(config.read_text() + "active_stack_id: another\n")  # `zenml stack set`
    assert ask(question) and question.asked == 5
    assert ask(question) and question.asked == 5


def test_the_change_counter_moves_with_every_committed_write(database):
    before = store_memo.store_stamp()
    write(database, "delete from pipeline_run")
    after = store_memo.store_stamp()
    assert before is not None and after is not None
    assert after["change_counter"] == before["change_counter"] + 1


def test_an_answer_asked_while_the_store_changed_is_not_filed(database):
    question = Asker({"chunk_a"}, side_effect=lambda: write(database))
    ask(question)
    ask(question)
    assert question.asked == 2
    assert not (database.parent / store_memo.MEMO_NAME).exists()


def test_an_answer_this_version_cannot_load_is_asked_again(database):
    spend = Asker(PreviousSpend(retry_rate=0.1, run="r"))

    def remembered(load=PreviousSpend.model_validate):
        dump = lambda value: value.model_dump(mode="json")  # noqa: E731
        return store_memo.remembered("previous_spend", "c", spend, dump=dump, load=load)

    assert remembered() == PreviousSpend(retry_rate=0.1, run="r") and spend.asked == 1
    assert remembered(load=lambda filed: PreviousSpend.model_validate(filed | {"retry_rate": "x"}))
    assert spend.asked == 2


def test_no_stamp_for_wal_mode_a_journal_a_server_or_a_store_set_by_variables(database, monkeypatch):
    assert store_memo.store_stamp() is not None
    journal = Path(f"{database}-journal")
    journal.write_bytes(b"")  # a write in progress
    assert store_memo.store_stamp() is None
    journal.unlink()
    monkeypatch.setenv("ZENML_STORE_URL", f"sqlite:///{database}")
    assert store_memo.store_stamp() is None
    monkeypatch.delenv("ZENML_STORE_URL")
    config = database.parents[2] / "config.yaml"
    sql = config.read_text()
    config.write_text("store:\n  type: rest\n  url: https://zenml.example.com\n")
    assert store_memo.store_stamp() is None
    config.write_text(sql.replace("    type: sql", "    type: aws"))  # secrets kept elsewhere
    assert store_memo.store_stamp() is None
    config.write_text(sql)
    connection = sqlite3.connect(database)
    connection.execute("pragma journal_mode=wal")
    connection.close()
    assert store_memo.store_stamp() is None
    question = Asker({"x"})
    ask(question)
    ask(question)
    assert question.asked == 2  # never served without a stamp
