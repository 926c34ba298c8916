"""One schema for every evaluation: a metric is computed only where its fields are present."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ragbench.hashing import canonical_json, short_hash
from ragbench.inputs.conversation import Turn, check_generated_turns
from ragbench.inputs.phoenix import PhoenixClient, PhoenixError
from ragbench.inputs.references import ReferenceSource
from ragbench.inputs.spans import SpanFileError, read_span_file
from ragbench.inputs.tables import (
    TableError,
    jsonl_records,
    load_yaml,
    read_dataset,
    read_table_file,
    read_utf8,
)
from ragbench.inputs.traces import LoggedAnswer, TraceReading, TracesConfig, trace_cases
from ragbench.inputs.uris import SourceError, is_uri, local_copy
from ragbench.section import Section
from ragbench.store import given_store


def name_cases(case_ids: list[str], shown: int = 6) -> str:
    """Case ids as a run prints them, so a number traces back to its cases: all of a few, else the first
    `shown` and how many more (the report and cases.jsonl list every one)."""
    if len(case_ids) <= shown:
        return ", ".join(case_ids)
    return f"{', '.join(case_ids[:shown])} and {len(case_ids) - shown} more"


class SourceChunk(BaseModel):
    """A passage a generated case was written from."""

    source: str
    start_index: int
    text: str


class Critique(BaseModel):
    """One critic's verdict on a generated case: its reasoning, then a 1-5 rating (None when the critic
    could not give one, with `error` saying why)."""

    criterion: str
    rating: int | None = Field(default=None, ge=1, le=5)
    reasoning: str = ""
    error: str | None = None
    failed_call: bool = False  # the call failed (retried by a later run), rather than an invalid reply


# "alone": a follow-up question read without its conversation, from the search passages.
Passages = Literal["source", "search", "alone"]
Method = Literal["exact", "containment", "token_f1", "llm", "refused", "answered"]


class RoundtripCheck(BaseModel):
    """One reader answer and whether it agrees: for an answerable case with its proposed answer, for an
    unanswerable one with declining (method "refused" = declined, kept; "answered" = rejected). A
    follow-up's "alone" check passes when its answer does NOT agree: the question needs its conversation.

    `agrees` is None exactly when `error` says why no verdict was reached; `failed_call` tells a provider
    failure (a later run retries it) from an invalid equivalence reply (the critic's answer)."""

    passages: Passages
    answer: str | None = None
    method: Method | None = None
    f1: float | None = None
    agrees: bool | None = None
    error: str | None = None
    failed_call: bool = False
    reasoning: str | None = None  # the LLM's reasoning when it decided equivalence


class CaseProvenance(BaseModel):
    """Where a generated case comes from and why it was kept or rejected (`run.py testset`)."""

    generator: str
    critic: str
    evolution: str
    source_chunks: list[SourceChunk]
    seed_question: str | None = None  # the plain question an evolved one was rewritten from
    critiques: list[Critique] = Field(default_factory=list)
    # The roundtrip filter's reader answers and whether each agreed (`ragbench.testset.roundtrip`).
    roundtrip: list[RoundtripCheck] = Field(default_factory=list)
    # An unanswerable case: the chunks (source@start) a search of the whole knowledge base found for it,
    # which the critic read to check that none answers it.
    checked_against: list[str] = Field(default_factory=list)
    rejected_because: list[str] = Field(default_factory=list)  # empty for a kept case


class EvalCase(BaseModel):
    """A question plus whatever ground truth is known about it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="unique within the eval set")
    question: str = Field(min_length=1, description="the question asked of every cell")
    history: list[Turn] = Field(
        default_factory=list,
        description="the conversation before the question, oldest first: {role: user|assistant, content}; "
        "an assistant turn is given as written (every cell reads the same conversation), or written "
        "{role: assistant, generate: true} to have the system under test write it (each cell's reader, or "
        "an external system)",
    )
    reference_answer: str | None = Field(
        default=None, description="a correct answer: rubrics that read one grade against it"
    )
    expected_sources: list[str] = Field(
        default_factory=list, description="knowledge-base sources holding the answer (retrieval metrics)"
    )
    good_words: list[str] = Field(default_factory=list, description="a correct answer contains each")
    bad_words: list[str] = Field(default_factory=list, description="an answer containing one fails")
    bad_first_words: list[str] = Field(default_factory=list, description="an answer starting with one fails")
    match: Literal["word", "substring"] = Field(
        default="word",
        description='"word": whole words/phrases, case-insensitive ("local" does not match "locally"); '
        '"substring": plain case-insensitive containment',
    )
    tags: list[str] = Field(default_factory=list, description="what tag-limited rubrics and suites select")
    human_answer: str | None = Field(
        default=None,
        description="an answer a person scored: every judge grades it too, and the report measures their "
        "agreement (with human_correctness)",
    )
    human_correctness: int | None = Field(
        default=None,
        ge=1,
        le=5,
        description="the person's score of human_answer on the 1-5 correctness scale",
    )
    expected_behaviour: Literal["answers", "declines"] = Field(
        default="answers",
        description="declines: the knowledge base does not answer it, so the right answer is a refusal "
        "(the keyword suite `declines` fails every other answer)",
    )
    provenance: CaseProvenance | None = Field(
        default=None, description="set by `run.py testset`: where a generated case comes from"
    )
    reference_from: ReferenceSource | None = Field(
        default=None,
        description="fetch the reference answer when the run happens (knowledge that changes); replaces "
        "reference_answer in that run",
    )
    expected_sources_from: ReferenceSource | None = Field(
        default=None, description="fetch expected_sources when the run happens (a list, or one per line)"
    )
    tolerance: float | None = Field(
        default=None,
        ge=0,
        description="relative: 0.3 = a number within 30% of the reference's counts as equal (decided "
        "without the judge when both answers carry a number; told to the judge otherwise)",
    )
    reference_error: str | None = Field(
        default=None, description="set by the run, never by hand: why a fetched reference failed"
    )
    logged: LoggedAnswer | None = Field(
        default=None,
        description="set from a trace (eval_cases.traces), never by hand: what the deployed system answered "
        "and retrieved, scored by a `traces` system without asking it again",
    )

    @property
    def case_type(self) -> str | None:
        """What the report breaks scores down by: a generated case's evolution, a trace's stratum (a
        stratified sample's), else None."""
        return self.provenance.evolution if self.provenance else self.logged.stratum if self.logged else None

    @field_validator("question")
    @classmethod
    def _strip_question(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("question is blank")
        return value.strip()

    @field_validator("history")
    @classmethod
    def _generated_turns_answer(cls, history: list[Turn]) -> list[Turn]:
        check_generated_turns(history)
        return history

    def turn_questions(self) -> list[EvalCase]:
        """One question per generated turn still to write, the user message it answers after the turns
        before it: what the cell searches (rewrite, retrieve, rerank, with every case) so its reader can
        write the turn from passages found for it (`ragbench.generation.turns`). Id ``<case id>#turn<n>``,
        n the generated turn's place in the history (from 1); no ground truth, so no metric counts it. A
        case as written (its turns' text in) has none: nothing is left to search for it."""
        return [
            EvalCase(
                id=turn_question_id(self.id, number),
                question=self.history[number - 2].content,
                history=self.history[: number - 2],
            )
            for number, turn in enumerate(self.history, start=1)
            if turn.pending
        ]

    @model_validator(mode="after")
    def _human_label_complete(self) -> EvalCase:
        if (self.human_answer is None) != (self.human_correctness is None):
            raise ValueError("human_answer and human_correctness go together: the score is of that answer")
        if self.human_answer is not None and not (self.reference_answer or self.reference_from):
            raise ValueError("a human label needs reference_answer: the judge grades correctness against it")
        if self.expected_sources_from is not None and self.expected_sources_from.gives != "answer":
            raise ValueError("expected_sources_from gives the sources themselves (gives: answer)")
        if self.expected_behaviour == "declines" and (
            self.reference_answer
            or self.expected_sources
            or self.reference_from
            or self.expected_sources_from
        ):
            raise ValueError(
                "a case whose expected behaviour is 'declines' has no reference_answer or expected_sources: "
                "the knowledge base does not answer it"
            )
        return self


def turn_question_id(case_id: str, number: int) -> str:
    """The id of the question a case's generated turn `number` (its place in the history) answers."""
    return f"{case_id}#turn{number}"


def searched_cases(cases: Sequence[EvalCase]) -> list[EvalCase]:
    """Every case, then the questions its generated turns answer (`EvalCase.turn_questions`): what the
    rewrite, retrieve and rerank stages search, so every cell has passages for the turns its reader writes."""
    return list(cases) + [question for case in cases for question in case.turn_questions()]


# Fields added after runs were recorded: left out of the fingerprint while at their default, so an
# unchanged eval set keeps the fingerprint that lines its runs up.
_LATER_DEFAULTS: dict[str, Any] = {
    "history": [],
    "expected_behaviour": "answers",
    "provenance": None,
    "reference_from": None,
    "expected_sources_from": None,
    "tolerance": None,
    "reference_error": None,
    "logged": None,
}


class EvalSuite(BaseModel):
    """All cases of one run, kept together so they travel as a single artifact."""

    cases: list[EvalCase]
    fingerprint: str = ""
    label: str = ""  # which eval set (file, dataset, or ZenML artifact and version) the cases came from
    traces: TraceReading | None = None  # cases read from traces: every trace accounted for

    @classmethod
    def of(cls, cases: list[EvalCase], label: str = "") -> EvalSuite:
        """The cases with a content fingerprint, so runs on the same eval set can be lined up."""
        dumped = [
            {k: v for k, v in case.model_dump(mode="json").items() if _LATER_DEFAULTS.get(k, ...) != v}
            for case in cases
        ]
        return cls(cases=cases, fingerprint=short_hash(canonical_json(dumped)), label=label)


class EvalCaseError(ValueError):
    """Raised for an unreadable, empty or inconsistent eval-case file."""


def load_eval_cases(path: str | Path) -> list[EvalCase]:
    """Read cases from .jsonl, .json, .yaml or .yml; ids must be unique."""
    path = Path(path)
    if not path.is_file():
        raise EvalCaseError(f"eval case file not found: {path}")
    try:
        text = read_utf8(path)
        loaded = load_yaml(text, path) if path.suffix in {".yaml", ".yml", ".json"} else None
    except TableError as error:
        raise EvalCaseError(str(error)) from None
    if path.suffix == ".jsonl":
        try:
            raw = [record for _, record in jsonl_records(text, path)]
        except TableError as error:
            raise EvalCaseError(str(error)) from None
    elif path.suffix in {".yaml", ".yml", ".json"}:
        raw = loaded.get("cases") if isinstance(loaded, dict) else loaded
    else:
        raise EvalCaseError(f"{path}: unsupported eval case format (use .jsonl, .json, .yaml)")
    if not isinstance(raw, list):
        raise EvalCaseError(f"{path}: no eval cases found")
    return _validated(raw, str(path))


def _validated(raw: list[Any], origin: str) -> list[EvalCase]:
    """Cases checked one by one (the error names the case) and for unique ids."""
    if not raw:
        raise EvalCaseError(f"{origin}: no eval cases found")
    cases = []
    for position, item in enumerate(raw):
        try:
            cases.append(EvalCase.model_validate(item))
        except Exception as error:  # pydantic ValidationError carries the field names
            raise EvalCaseError(f"{origin}: case #{position + 1} is invalid: {error}") from error
    ids = [case.id for case in searched_cases(cases)]  # a generated turn's question is searched by its id too
    duplicates = sorted(
        case_id for case_id, count in Counter(ids).items() if count > 1
    )  # linear: 10^4 traces
    if duplicates:
        raise EvalCaseError(f"{origin}: duplicate case ids: {', '.join(duplicates)}")
    return cases


_LIST_FIELDS = {"expected_sources", "good_words", "bad_words", "bad_first_words", "tags"}


def _cell(field: str, value: Any) -> Any:
    """A table cell as the field wants it: one source in a string column becomes a one-item list; a
    history is a list of {role, content} mappings, or its JSON text (a CSV cell)."""
    if field == "history":
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else []
            except json.JSONDecodeError as error:
                raise EvalCaseError(f"history column: not a JSON list of turns ({error})") from None
        return [dict(turn) if isinstance(turn, dict) else turn for turn in value]
    if field in _LIST_FIELDS:
        return [str(item) for item in value] if isinstance(value, list | tuple) else [str(value)]
    return str(value)


def cases_from_rows(rows: list[dict[str, Any]], columns: dict[str, str], origin: str) -> list[EvalCase]:
    """Eval cases from table rows; `columns` maps case fields to column names, other fields are read
    from a column of the same name when there is one, and a missing id becomes ``case-<row number>``."""
    if not rows:
        raise EvalCaseError(f"{origin}: no eval cases found")
    available = set(rows[0])
    missing = sorted(column for column in columns.values() if column not in available)
    if missing:
        raise EvalCaseError(f"{origin}: column(s) {missing} not found; available: {sorted(available)}")
    mapping = {field: field for field in EvalCase.model_fields if field in available} | columns
    if "question" not in mapping:
        raise EvalCaseError(
            f"{origin}: no 'question' column; map one with eval_cases.columns.question "
            f"(available: {sorted(available)})"
        )
    raw = []
    for number, row in enumerate(rows, start=1):
        try:
            item = {field: _cell(field, row[col]) for field, col in mapping.items() if row[col] is not None}
        except EvalCaseError as error:
            raise EvalCaseError(f"{origin}: row {number}: {error}") from None
        item.setdefault("id", f"case-{number}")
        raw.append(item)
    return _validated(raw, origin)


def load_eval_source(source: EvalCasesConfig) -> list[EvalCase]:
    """The configured cases: a ragbench case file as is, an eval set artifact, or a table via `columns`."""
    if source.traces is not None:
        return load_trace_cases(source.traces)[0]
    try:
        if source.artifact is not None:
            return load_eval_set_artifact(source.artifact, source.version, source.limit)[0]
        if source.dataset is not None:
            rows = read_dataset(source.dataset, source.split, source.revision, source.limit)
        else:
            with local_copy(source.path or "") as path:  # a URI is read here, where the step runs
                if source.columns or path.suffix.lower() in {".csv", ".parquet"}:
                    rows = read_table_file(path, source.limit)
                else:
                    return load_eval_cases(path)[: source.limit]
    except TableError as error:
        raise EvalCaseError(str(error)) from error
    except SourceError as error:
        raise EvalCaseError(f"eval_cases: {error}") from None
    return cases_from_rows(rows, source.columns, source.label)


def load_eval_set_artifact(
    name: str, version: str | int | None, limit: int | None
) -> tuple[list[EvalCase], str]:
    """The kept cases of an eval set that `run.py testset` stored in ZenML (the latest version unless one
    is named)."""
    try:
        artifact = given_store().artifact(name, str(version) if version is not None else None)
    except KeyError:
        which = f"artifact {name!r}" if version is None else f"version {version} of artifact {name!r}"
        raise EvalCaseError(f"eval_cases.artifact: no {which}; make one with `run.py testset`") from None
    eval_set = artifact.load()
    cases = getattr(eval_set, "cases", None)
    label = f"{name!r} version {artifact.version}"
    if not isinstance(cases, list) or not all(isinstance(case, EvalCase) for case in cases):
        raise EvalCaseError(f"eval_cases.artifact: {label} is not an eval set")
    failed = sum(
        getattr(eval_set, "summary", {}).get(key, 0) for key in ("generator_failures", "critic_failures")
    )
    if failed:
        raise EvalCaseError(
            f"eval_cases.artifact: {label} is incomplete ({failed} generator or critic calls failed); run "
            "`run.py testset` again to finish it (only the failed calls are made), or name another version"
        )
    if not cases:
        raise EvalCaseError(f"eval_cases.artifact: {label} kept no cases")
    return cases[:limit], f"artifact {name} version {artifact.version}"


def load_trace_cases(
    source: TracesConfig, now: datetime | None = None
) -> tuple[list[EvalCase], TraceReading]:
    """The RAG traces of an OTLP/JSON export or a Phoenix project as cases (`ragbench.inputs.traces`), the
    window counted back from `now` (default: this moment); EvalCaseError for a file that is no export, a
    server that cannot be read, or no RAG trace left."""
    now = now or datetime.now(UTC)
    try:
        if source.phoenix is not None:
            with PhoenixClient(source.phoenix) as phoenix:
                read = phoenix.spans(*source.window(now))
        else:
            with local_copy(source.path or "") as path:
                if not path.is_file():
                    raise EvalCaseError(f"eval_cases.traces: span file not found: {source.path}")
                read = read_span_file(path.read_bytes(), source.origin)
        raw, reading = trace_cases(read, source, source.origin, now)  # ValueError: too small for its strata
    except (SpanFileError, SourceError, PhoenixError, ValueError) as error:
        raise EvalCaseError(f"eval_cases.traces: {error}") from None
    if not raw:
        raise EvalCaseError(f"eval_cases.traces: no RAG trace to score. {reading.summary()}")
    return _validated(raw, source.origin), reading


def load_eval_suite_from(source: EvalCasesConfig) -> EvalSuite:
    """The cases with the label of the eval set they came from (an artifact's names its version)."""
    if source.traces is not None:
        cases, reading = load_trace_cases(source.traces)
        return EvalSuite.of(cases, source.label).model_copy(update={"traces": reading})
    if source.artifact is not None:
        return EvalSuite.of(*load_eval_set_artifact(source.artifact, source.version, source.limit))
    return EvalSuite.of(load_eval_source(source), source.label)


class EvalCasesConfig(Section):
    """Where eval cases come from: a file in ragbench's schema (.yaml/.json/.jsonl, e.g. a set exported by
    `run.py testset`), a ZenML artifact that `run.py testset` made (by name, and version or the latest), or
    a table whose columns are mapped onto that schema (a .jsonl/.json/.csv/.parquet file with `columns`,
    or a Hugging Face dataset such as the cookbook's ``m-ric/huggingface_doc_qa_eval``)."""

    path: str | None = Field(default=None, description="eval case file")
    dataset: str | None = Field(default=None, description="Hugging Face dataset name or local dataset folder")
    artifact: str | None = Field(default=None, description="name of an eval set artifact from run.py testset")
    version: str | int | None = Field(default=None, description="artifact version; default: the latest")
    split: str = Field(default="train", description="dataset split (dataset)")
    revision: str | None = Field(default=None, description="dataset revision (git tag, branch or commit)")
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="eval-case field -> column of the table, e.g. {reference_answer: answer}; "
        "unmapped fields are read from the column of the same name when it exists",
    )
    limit: int | None = Field(default=None, gt=0, description="keep only the first N cases")
    traces: TracesConfig | None = Field(
        default=None,
        description="the deployed system's RAG traces (OpenInference spans in an OTLP/JSON export) as cases",
    )

    @model_validator(mode="after")
    def _check_source(self) -> EvalCasesConfig:
        sources = (self.path, self.dataset, self.artifact, self.traces)
        if sum(source is not None for source in sources) != 1:
            raise ValueError("eval_cases needs exactly one of path, dataset, artifact or traces")
        if self.version is not None and self.artifact is None:
            raise ValueError("eval_cases.version applies to an artifact only")
        unknown = sorted(set(self.columns) - set(EvalCase.model_fields))
        if unknown:
            raise ValueError(
                f"eval_cases.columns: unknown field(s) {unknown}; fields: {sorted(EvalCase.model_fields)}"
            )
        return self

    @property
    def on_client(self) -> bool:
        """A file or dataset folder on the client's disk, or a Phoenix server's traces: the client loads the
        cases and hands the run a snapshot artifact (for traces, the window as the client read it, so every
        step scores the same traces). URIs, Hub datasets and artifacts load in the step."""
        if self.traces is not None and self.traces.phoenix is not None:
            return True
        if self.path is not None or self.traces is not None:
            return not is_uri(self.path or self.traces.path)  # type: ignore[union-attr]
        return self.dataset is not None and Path(self.dataset).expanduser().exists()

    @property
    def label(self) -> str:
        if self.artifact is not None:
            version = "latest version" if self.version is None else f"version {self.version}"
            return f"artifact {self.artifact} ({version})"
        if self.traces is not None:
            return f"traces {self.traces.origin}"
        return self.path or f"dataset {self.dataset}"
