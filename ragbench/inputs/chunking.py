"""Token-measured chunking, done once per chunk size and shared by every embedding model."""

from __future__ import annotations

import logging
from functools import lru_cache

from pydantic import BaseModel

from ragbench.hashing import short_hash
from ragbench.inputs.knowledge_base import Corpus
from ragbench.models.provision import resolve_model

logger = logging.getLogger(__name__)

# Regexes, coarsest first (headings, paragraphs, lines, sentences, words): chunks break at structure.
SEPARATORS = [r"\n#{1,6} ", r"\n\n", r"\n", r"\. ", " ", ""]


class Chunk(BaseModel):
    text: str
    source: str
    start_index: int
    # The other documents that hold this exact text: it is indexed once, and it is found in each of them.
    shared_with: list[str] = []

    @property
    def fingerprinted(self) -> str:
        """What the chunk set's fingerprint hashes of this chunk: the sharing documents only when there are
        any, so a chunk set without shared text keeps the fingerprint it had before they were kept."""
        shared = "".join(f"{source}\0" for source in self.shared_with) + "\0" if self.shared_with else ""
        return f"{self.source}\0{self.start_index}\0{self.text}\0{shared}"


class ChunkSet(BaseModel):
    """The chunks of one corpus at one chunk size; identical for every embedding model."""

    chunk_size: int
    chunk_overlap: int
    tokenizer: str
    corpus_fingerprint: str
    chunks: list[Chunk]
    duplicates_removed: int = 0

    @property
    def texts(self) -> list[str]:
        return [chunk.text for chunk in self.chunks]

    @property
    def fingerprint(self) -> str:
        return short_hash(*(chunk.fingerprinted for chunk in self.chunks))

    def check_indexed_by(self, index_fingerprint: str, index: str) -> None:
        """Refuse to read positions of an index (`index` names it) made of another chunk set as rows of this
        one: the positions would point at other chunks."""
        if index_fingerprint != self.fingerprint:
            raise ValueError(
                f"{index} of chunk set {index_fingerprint} used with chunk set {self.fingerprint}"
            )


@lru_cache(maxsize=8)
def load_tokenizer(model_name: str):  # -> transformers.PreTrainedTokenizerBase
    """The tokenizer of a (resolved) model; cached because chunking and fit checks share it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(model_name).location)
    tokenizer.model_max_length = 10**9  # only measures length here; silences the "too long" warning
    return tokenizer


def _with_start_indices(text: str, pieces: list[str]) -> list[tuple[str, int]]:
    """Character offsets of in-order pieces.

    LangChain's own `add_start_index` subtracts the overlap, counted in tokens here, from a character
    offset, and so misplaces or loses chunks when length is measured in tokens.
    """
    located, cursor = [], 0
    for piece in pieces:
        start = text.find(piece, cursor)
        if start < 0:  # cannot happen for verbatim pieces; keep a truthful offset anyway
            start = text.find(piece)
        located.append((piece, start))
        cursor = max(start, 0) + 1
    return located


def chunk_corpus(corpus: Corpus, chunk_size: int, chunk_overlap: int, tokenizer_name: str) -> ChunkSet:
    """Split with LangChain's recursive splitter, measuring length in the tokenizer's tokens.

    The budget covers the encoder's special tokens too ([CLS]/[SEP]), so a chunk of `chunk_size`
    fits a model whose maximum sequence length is `chunk_size` without silent truncation.
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if chunk_overlap >= chunk_size:
        raise ValueError(f"chunk overlap ({chunk_overlap}) must be smaller than chunk size ({chunk_size})")
    tokenizer = load_tokenizer(tokenizer_name)
    text_budget = chunk_size - tokenizer.num_special_tokens_to_add()
    splitter = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        tokenizer,
        chunk_size=text_budget,
        chunk_overlap=min(chunk_overlap, text_budget - 1),
        separators=SEPARATORS,
        is_separator_regex=True,
        strip_whitespace=True,
    )
    by_text: dict[str, Chunk] = {}
    pieces = 0
    for document in corpus.documents:
        for text, start in _with_start_indices(document.text, splitter.split_text(document.text)):
            pieces += 1
            if not text:
                continue
            if (first := by_text.get(text)) is None:
                by_text[text] = Chunk(text=text, source=document.source, start_index=start)
            elif document.source not in (first.source, *first.shared_with):
                first.shared_with.append(document.source)
    chunks = list(by_text.values())
    duplicates = pieces - len(chunks)
    logger.info("chunk size %d: %d chunks (%d exact duplicates removed)", chunk_size, len(chunks), duplicates)
    return ChunkSet(
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        tokenizer=tokenizer_name,
        corpus_fingerprint=corpus.fingerprint,
        chunks=chunks,
        duplicates_removed=duplicates,
    )


def overlap_tokens(chunk_size: int, overlap: float) -> int:
    """A share of the chunk size (below 1) or a number of tokens (1 or more)."""
    return round(chunk_size * overlap) if overlap < 1 else int(overlap)
