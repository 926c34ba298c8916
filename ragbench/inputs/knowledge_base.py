"""Knowledge-base loading: every source becomes the same list of (text, source) documents."""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragbench.hashing import sha256_hex
from ragbench.inputs.tables import TableError, read_dataset, read_table_file
from ragbench.inputs.uris import SourceError, is_uri, local_copy


class KnowledgeBaseConfig(BaseModel):
    """Where documents come from; `kind` selects which of the other fields apply.

    Lives here, not in the config module, so the chunk and index steps do not depend on LLM code."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["pydoc_topics", "folder", "file", "hf_dataset"] = Field(
        default="pydoc_topics",
        description="pydoc_topics: CPython's language reference topics; folder: .md .txt .rst .html files; "
        "file: a .jsonl .json .csv .parquet table; hf_dataset: a Hugging Face dataset",
    )
    path: str | None = Field(default=None, description="folder (kind=folder) or data file (kind=file)")
    dataset: str | None = Field(default=None, description="Hugging Face dataset name (kind=hf_dataset)")
    split: str = Field(default="train", description="dataset split (kind=hf_dataset)")
    revision: str | None = Field(default=None, description="dataset revision: git tag, branch or commit")
    text_column: str = Field(
        default="text", description="column holding a document's text (file, hf_dataset)"
    )
    source_column: str = Field(
        default="source", description="column naming a document's source (file, hf_dataset)"
    )
    limit: int | None = Field(default=None, gt=0, description="keep only the first N documents")
    warn_chunks: int = Field(
        default=50_000, ge=1, description="warn, with the estimated index time, above this many chunks"
    )

    @property
    def on_client(self) -> bool:
        """A folder or file on the client's disk: the client loads it and hands the run a snapshot artifact,
        since a step elsewhere cannot see it. URIs, datasets and the shipped default load in the step."""
        return self.kind in {"folder", "file"} and not is_uri(self.path or "")

    @model_validator(mode="after")
    def _check_kind_fields(self) -> KnowledgeBaseConfig:
        if self.kind in {"folder", "file"} and not self.path:
            raise ValueError(f"knowledge_base.path is required when kind is {self.kind!r}")
        if self.kind == "hf_dataset" and not self.dataset:
            raise ValueError("knowledge_base.dataset is required when kind is 'hf_dataset'")
        return self


logger = logging.getLogger(__name__)

TEXT_SUFFIXES = {".md", ".txt", ".rst", ".html", ".htm"}


class KnowledgeBaseError(ValueError):
    """The knowledge base is missing, unreadable or holds no usable text."""


class Document(BaseModel):
    text: str
    source: str


class Corpus(BaseModel):
    """All documents of one knowledge base plus the fingerprint of their content that keys every cache
    downstream (`knowledge_base_fingerprint`); `description` says where they were read from, for people."""

    documents: list[Document]
    fingerprint: str
    description: str
    skipped: list[str] = Field(default_factory=list, description="files skipped, with the reason")

    @property
    def total_characters(self) -> int:
        return sum(len(document.text) for document in self.documents)


PYDOC_TOPICS_SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "pydoc_topics.json.gz"


def _pydoc_topics() -> tuple[dict[str, str], str]:
    """The language reference topics as shipped with ragbench (taken from one Python's pydoc_data), so the
    default knowledge base is the same documents on every Python a step may run on."""
    snapshot = json.loads(gzip.decompress(PYDOC_TOPICS_SNAPSHOT.read_bytes()))
    return snapshot["topics"], snapshot["python"]


# Bump when what a fingerprint covers changes.
_FINGERPRINT_VERSION = "documents-v1"


def documents_digest(documents: Sequence[Document]) -> str:
    """sha256 (hex) of the documents, in order: each one's source name and text. Nothing else: not the
    settings that found them, nor where they were read from (a folder's sources are relative to it), so
    the same documents anywhere have the same digest."""
    return sha256_hex(_framed(documents))


def _framed(documents: Sequence[Document]) -> Iterator[str | bytes]:
    """What `documents_digest` hashes, one part at a time: the version, then each source and text after its
    length, so no two documents lists run together."""
    yield _FINGERPRINT_VERSION
    for document in documents:
        for part in (document.source, document.text):
            encoded = part.encode("utf-8")
            yield len(encoded).to_bytes(8, "big")
            yield encoded


def knowledge_base_fingerprint(documents: Sequence[Document]) -> str:
    """The content fingerprint that keys every cache downstream (`documents_digest`, shortened): a moved
    folder or an edited setting that reads the same documents (e.g. `warn_chunks`) keeps it; an edited,
    added, removed or renamed document changes it."""
    return documents_digest(documents)[:16]


def _html_to_text(html: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for element in soup(["script", "style", "noscript", "template"]):
        element.decompose()
    lines = (line.strip() for line in soup.get_text("\n").splitlines())
    return "\n".join(line for line in lines if line)


def _read_text_file(file: Path) -> tuple[str | None, str | None]:
    """Returns (text, None) or (None, reason to skip)."""
    data = file.read_bytes()
    if not data.strip():
        return None, "empty file"
    if b"\0" in data[:8192]:
        return None, "binary file"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        return None, f"not UTF-8 ({error.reason} at byte {error.start})"
    if file.suffix.lower() in {".html", ".htm"}:
        text = _html_to_text(text)
    if not text.strip():
        return None, "no text after cleaning"
    return text, None


def _load_folder(folder: Path) -> tuple[list[Document], list[str]]:
    documents, skipped = [], []
    for file in sorted(folder.rglob("*")):
        if not file.is_file() or any(part.startswith(".") for part in file.relative_to(folder).parts):
            continue
        relative = file.relative_to(folder).as_posix()
        if file.suffix.lower() not in TEXT_SUFFIXES:
            skipped.append(f"{relative}: unsupported file type")
            continue
        text, reason = _read_text_file(file)
        if text is None:
            skipped.append(f"{relative}: {reason}")
        else:
            documents.append(Document(text=text, source=relative))
    return documents, skipped


def _rows_to_documents(rows: list[dict], config: KnowledgeBaseConfig, origin: str) -> list[Document]:
    if not rows:
        return []
    missing = [column for column in (config.text_column, config.source_column) if column not in rows[0]]
    if missing:
        raise KnowledgeBaseError(
            f"{origin}: column(s) {missing} not found; available: {sorted(rows[0])}. "
            "Set knowledge_base.text_column / knowledge_base.source_column."
        )
    documents = []
    for position, row in enumerate(rows):
        text = row[config.text_column]
        if isinstance(text, str) and text.strip():
            source = row[config.source_column]
            documents.append(Document(text=text, source=str(source if source is not None else position)))
    return documents


def _load_table(config: KnowledgeBaseConfig, file: Path) -> list[Document]:
    try:
        if config.kind == "hf_dataset":
            origin = f"dataset {config.dataset}"
            rows = read_dataset(config.dataset or "", config.split, config.revision, config.limit)
        else:
            origin = str(config.path)
            rows = read_table_file(file, config.limit)
    except TableError as error:
        raise KnowledgeBaseError(str(error)) from error
    return _rows_to_documents(rows, config, origin)


def load_corpus(config: KnowledgeBaseConfig) -> Corpus:
    """Load, clean and check a knowledge base; raise if nothing usable remains. A URI is read with fsspec
    here, where the step runs."""
    try:
        with local_copy(config.path or "") as root:
            return _load_corpus(config, root)
    except SourceError as error:
        raise KnowledgeBaseError(f"knowledge base: {error}") from None


def _load_corpus(config: KnowledgeBaseConfig, root: Path) -> Corpus:
    skipped: list[str] = []
    if config.kind == "pydoc_topics":
        topics, version = _pydoc_topics()
        documents = [Document(text=text, source=name) for name, text in sorted(topics.items())]
        description = f"Python {version} language reference topics (pydoc_data, as shipped with ragbench)"
    elif config.kind == "folder":
        if not root.is_dir():
            raise KnowledgeBaseError(f"knowledge base folder not found: {config.path}")
        documents, skipped = _load_folder(root)
        description = f"folder {config.path}"
    else:
        documents = _load_table(config, root)
        description = f"dataset {config.dataset}" if config.kind == "hf_dataset" else f"file {config.path}"
    if config.limit and config.kind in {"pydoc_topics", "folder"}:
        documents = documents[: config.limit]
    for reason in skipped:
        logger.warning("knowledge base: skipped %s", reason)
    if not any(document.text.strip() for document in documents):
        raise KnowledgeBaseError(f"knowledge base ({description}) holds no usable text")
    return Corpus(
        documents=documents,
        fingerprint=knowledge_base_fingerprint(documents),
        description=description,
        skipped=skipped,
    )
