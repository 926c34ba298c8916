"""A run names the code it ran: the checkout read with git (clean, modified, none), the key packages'
versions without importing them, and the differences `compare` and the gate report."""

import subprocess
import sys
from pathlib import Path

import pytest

import ragbench
from ragbench.provenance import (
    KEY_PACKAGES,
    READ_AT_MOST,
    Checkout,
    CodeVersion,
    package_versions,
    read_checkout,
)


def git(root: Path, *arguments: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *arguments],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A git repository with one commit: a stand-in for a checkout of ragbench."""
    root = tmp_path / "checkout"
    root.mkdir()
    git(root, "init", "-q")
    (root / "code.py").write_text("x = 1\n")
    (root / ".gitignore").write_text("out/\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "first")
    return root


def test_a_clean_checkout_names_its_commit_and_no_modification(checkout):
    read = read_checkout(checkout)
    assert read == Checkout(commit=git(checkout, "rev-parse", "HEAD"), dirty=False)
    assert len(read.commit) == 40


def test_an_ignored_file_leaves_the_tree_clean_an_edit_or_a_new_file_does_not(checkout):
    (checkout / "out").mkdir()
    (checkout / "out" / "report.html").write_text("a run's output")
    assert read_checkout(checkout).dirty is False
    (checkout / "code.py").write_text("x = 2\n")
    edited = read_checkout(checkout)
    assert edited.dirty is True and edited.commit == git(checkout, "rev-parse", "HEAD")
    assert read_checkout(checkout) == edited  # the same edits: the same digest
    (checkout / "new_scorer.py").write_text("y = 1\n")
    added = read_checkout(checkout)
    assert added.dirty and added.changes != edited.changes
    (checkout / "new_scorer.py").write_text("y = 2\n")  # an untracked file's content counts, not its name
    assert read_checkout(checkout).changes != added.changes
    (checkout / "documents.bin").write_bytes(b"x" * (READ_AT_MOST + 1))  # by its size and time, not read
    assert read_checkout(checkout).changes not in (added.changes, None)


def test_no_checkout_where_the_folder_is_not_a_repository_top_or_git_is_missing(
    checkout, tmp_path, monkeypatch
):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert read_checkout(plain) == Checkout()
    inside = checkout / "sub"  # an installed ragbench inside another project's repository is not its code
    inside.mkdir()
    assert read_checkout(inside) == Checkout()
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")  # a repository without a commit yet
    assert read_checkout(empty) == Checkout()
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    assert read_checkout(checkout) == Checkout()


def test_package_versions_are_read_without_importing_the_packages():
    """torch alone takes seconds to import: a fresh interpreter reads every version and imports none."""
    probe = (
        "import sys; from ragbench.provenance import package_versions; found = package_versions(); "
        "assert not [m for m in ('torch', 'zenml', 'litellm', 'llama_cpp', 'faiss') if m in sys.modules]; "
        "print(sorted(found))"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True)
    assert "torch" in done.stdout and "zenml" in done.stdout
    assert set(package_versions()) <= set(KEY_PACKAGES)
    assert "not-a-package" not in package_versions(("not-a-package",))


def code(commit: str | None, dirty: bool = False, changes: str | None = None, **packages: str) -> CodeVersion:
    return CodeVersion(
        ragbench_version="0.2.0",
        checkout=Checkout(commit=commit, dirty=dirty if commit else None, changes=changes),
        packages=packages or {"torch": "2.13.0"},
    )


def test_the_metadata_holds_the_code_and_reads_back():
    clean = code("a" * 40)
    flat = clean.metadata()
    assert flat == {
        "ragbench_version": "0.2.0",
        "package_versions": {"torch": "2.13.0"},
        "git_commit": "a" * 40,
        "git_dirty": False,
    }
    assert CodeVersion.from_metadata(flat) == clean
    modified = code("a" * 40, dirty=True, changes="d1")
    assert CodeVersion.from_metadata(modified.metadata()) == modified
    installed = code(None)  # no checkout: no commit key, and the packages still say what ran
    assert (
        "git_commit" not in installed.metadata()
        and CodeVersion.from_metadata(installed.metadata()) == installed
    )
    assert CodeVersion.from_metadata({"ragbench_version": "0.1.0"}) is None  # a run from before 0.2.0
    assert "commit aaaaaaaaaaaa (modified tree)" in modified.line() and "torch 2.13.0" in modified.line()
    assert "no git checkout" in installed.line()
    assert CodeVersion.here(Checkout()).ragbench_version == ragbench.__version__


def test_every_difference_in_code_is_named_and_the_same_code_is_none():
    base = code("a" * 40)
    assert base.changes_from(code("a" * 40)) == []
    assert code("b" * 40).changes_from(base) == ["commit aaaaaaaaaaaa -> commit bbbbbbbbbbbb"]
    assert code("a" * 40, dirty=True, changes="d1").changes_from(base) == [
        "this run ran a modified tree at commit aaaaaaaaaaaa"
    ]
    assert base.changes_from(code("a" * 40, dirty=True, changes="d1")) == [
        "the baseline ran a modified tree at commit aaaaaaaaaaaa"
    ]
    same_edits = code("a" * 40, dirty=True, changes="d1")
    assert same_edits.changes_from(same_edits) == []
    assert code("a" * 40, dirty=True, changes="d2").changes_from(same_edits) == [
        "both runs ran a modified tree at commit aaaaaaaaaaaa, with other uncommitted changes"
    ]
    upgraded = code("a" * 40, torch="2.14.0", zenml="0.98.0")
    assert upgraded.changes_from(base) == ["torch 2.13.0 -> 2.14.0", "zenml not installed -> 0.98.0"]
    assert code(None).changes_from(base) == ["commit aaaaaaaaaaaa -> no git checkout"]
    assert base.changes_from(None) == [
        "the baseline recorded no code (a run from before runs recorded their commit and packages)"
    ]
    older = base.model_copy(update={"ragbench_version": "0.1.0"})
    assert base.changes_from(older) == ["ragbench 0.1.0 -> 0.2.0"]
