import json
import logging

import pytest

from ragbench.config.model import KnowledgeBaseConfig
from ragbench.inputs.knowledge_base import (
    Document,
    KnowledgeBaseError,
    knowledge_base_fingerprint,
    load_corpus,
)


def make_folder(root):
    (root / "guide").mkdir(parents=True)
    (root / "guide" / "intro.md").write_text("# Intro\nRAG retrieves chunks.\n")
    (root / "notes.txt").write_text("Plain text note.")
    (root / "api.rst").write_text("API\n===\nCall ``run()``.\n")
    (root / "page.html").write_text(
        "<html><head><style>p{color:red}</style><script>alert(1)</script></head>"
        "<body><h1>Title</h1><p>Visible &amp; kept.</p></body></html>"
    )
    (root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (root / "blob.md").write_bytes(b"\x00\x01\x02binary")
    (root / "empty.txt").write_text("   \n")
    (root / "image.png").write_bytes(b"\x89PNG")
    return root


def test_folder_is_loaded_recursively_with_relative_sources_and_html_reduced_to_text(tmp_path, caplog):
    folder = make_folder(tmp_path / "kb")
    with caplog.at_level(logging.WARNING):
        corpus = load_corpus(KnowledgeBaseConfig(kind="folder", path=str(folder)))
    by_source = {document.source: document.text for document in corpus.documents}
    assert sorted(by_source) == ["api.rst", "guide/intro.md", "notes.txt", "page.html"]
    assert by_source["page.html"] == "Title\nVisible & kept."
    skipped = " ".join(corpus.skipped)
    for name in ("latin1.txt: not UTF-8", "blob.md: binary", "empty.txt: empty", "image.png: unsupported"):
        assert name in skipped
        assert name.split(":")[0] in caplog.text


def test_knowledge_base_without_usable_text_is_an_error(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "empty.md").write_text("")
    with pytest.raises(KnowledgeBaseError, match="no usable text"):
        load_corpus(KnowledgeBaseConfig(kind="folder", path=str(folder)))
    with pytest.raises(KnowledgeBaseError, match="not found"):
        load_corpus(KnowledgeBaseConfig(kind="folder", path=str(tmp_path / "missing")))


def test_default_knowledge_base_is_the_shipped_snapshot_of_the_pydoc_topics():
    """The same documents (and fingerprint) on every Python a step may run on: not this one's pydoc_data."""
    import gzip
    import sys

    from ragbench.inputs.knowledge_base import PYDOC_TOPICS_SNAPSHOT

    snapshot = json.loads(gzip.decompress(PYDOC_TOPICS_SNAPSHOT.read_bytes()))
    corpus = load_corpus(KnowledgeBaseConfig())
    assert {document.source for document in corpus.documents} == set(snapshot["topics"]) >= {"if", "with"}
    assert (
        f"Python {snapshot['python']}" in corpus.description and "shipped with ragbench" in corpus.description
    )
    if sys.version.split()[0] == snapshot["python"]:  # taken from this very Python: nothing lost on the way
        from pydoc_data.topics import topics

        assert {d.source: d.text for d in corpus.documents} == topics


def test_a_uri_knowledge_base_is_read_where_the_step_runs_and_matches_the_folder(tmp_path):
    """`file://` stands in for s3:// or gs:// (same fsspec code path, no bucket needed)."""
    folder = make_folder(tmp_path / "kb")
    local = load_corpus(KnowledgeBaseConfig(kind="folder", path=str(folder)))
    remote_config = KnowledgeBaseConfig(kind="folder", path=folder.as_uri())
    remote = load_corpus(remote_config)
    assert remote.documents == local.documents and remote.skipped == local.skipped
    assert remote.description == f"folder {folder.as_uri()}"
    assert not remote_config.on_client and KnowledgeBaseConfig(kind="folder", path=str(folder)).on_client
    (folder / "notes.txt").write_text("Edited note.")
    assert load_corpus(remote_config).fingerprint != remote.fingerprint
    table = tmp_path / "docs.jsonl"
    table.write_text(json.dumps({"text": "Row text.", "source": "r1"}) + "\n")
    from_uri = load_corpus(KnowledgeBaseConfig(kind="file", path=table.as_uri()))
    assert [(d.source, d.text) for d in from_uri.documents] == [("r1", "Row text.")]
    with pytest.raises(KnowledgeBaseError, match="does not exist"):
        load_corpus(KnowledgeBaseConfig(kind="folder", path=(tmp_path / "missing").as_uri()))
    with pytest.raises(KnowledgeBaseError, match="cannot read nosuchscheme://bucket/kb"):
        load_corpus(KnowledgeBaseConfig(kind="folder", path="nosuchscheme://bucket/kb"))


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_table_files_with_configurable_columns(tmp_path, suffix):
    import datasets

    rows = [{"body": "First text.", "url": "a"}, {"body": "", "url": "b"}, {"body": "Third.", "url": "c"}]
    path = tmp_path / f"kb{suffix}"
    table = datasets.Dataset.from_list(rows)
    {".jsonl": table.to_json, ".csv": table.to_csv, ".parquet": table.to_parquet}[suffix](str(path))
    config = KnowledgeBaseConfig(kind="file", path=str(path), text_column="body", source_column="url")
    corpus = load_corpus(config)
    assert [(document.source, document.text) for document in corpus.documents] == [
        ("a", "First text."),
        ("c", "Third."),
    ]
    with pytest.raises(KnowledgeBaseError, match="column"):
        load_corpus(KnowledgeBaseConfig(kind="file", path=str(path), text_column="text"))


def test_cookbook_dataset_is_expressible_and_fails_clearly_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    config = KnowledgeBaseConfig(
        kind="hf_dataset", dataset="m-ric/huggingface_doc", text_column="text", source_column="source"
    )
    with pytest.raises(KnowledgeBaseError, match="m-ric/huggingface_doc"):
        load_corpus(config)


def test_fingerprint_changes_when_a_file_changes(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "a.md").write_text(json.dumps({"v": 1}))
    config = KnowledgeBaseConfig(kind="folder", path=str(folder))
    before = load_corpus(config).fingerprint
    assert (
        load_corpus(config).fingerprint == before == knowledge_base_fingerprint(load_corpus(config).documents)
    )
    (folder / "a.md").write_text(json.dumps({"v": 2}))
    assert load_corpus(config).fingerprint != before


def test_fingerprint_is_the_documents_not_where_or_how_they_were_read(tmp_path):
    """A moved folder, a setting that reads the same documents, a file no document comes from: the same
    fingerprint (it keys chunking and embedding). A renamed document or a swapped text: another one."""
    import shutil

    folder = make_folder(tmp_path / "kb")
    before = load_corpus(KnowledgeBaseConfig(kind="folder", path=str(folder)))
    moved = shutil.copytree(folder, tmp_path / "elsewhere" / "docs")
    (moved / "unsupported.bin").write_bytes(b"\x00")
    after = load_corpus(KnowledgeBaseConfig(kind="folder", path=str(moved), warn_chunks=10))
    assert after.fingerprint == before.fingerprint and after.description != before.description
    (moved / "notes.txt").rename(moved / "renamed.txt")
    assert load_corpus(KnowledgeBaseConfig(kind="folder", path=str(moved))).fingerprint != before.fingerprint
    documents = before.documents
    swapped = [documents[0].model_copy(update={"text": documents[1].text}), *documents[1:]]
    assert knowledge_base_fingerprint(swapped) != before.fingerprint
    # a document's source and text cannot run into the next one's
    assert knowledge_base_fingerprint([Document(source="a", text="bc")]) != knowledge_base_fingerprint(
        [Document(source="ab", text="c")]
    )
