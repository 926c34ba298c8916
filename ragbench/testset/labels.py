"""How far to trust the eval-set filters: their keep/reject decisions against a person's labels.

A labels file (YAML or JSONL) holds a person's verdict on generated candidates, one entry each:

    - id: simple-0003            # the candidate's id
      question: What does ...?   # its question, to check the label still belongs to it
      human_keep: true           # should the case be in the eval set?
      reason: answerable from the passage and useful

Each filter (and "combined", the set the filters keep together) is measured like the judge is against
human labels: precision (share of kept cases that are good), recall (share of good cases kept) and
Cohen's kappa (agreement on keep/reject beyond chance). A label is only used while its question matches
the candidate's (whitespace and case aside): a re-generated set must not be measured against labels
written for other questions, so such labels are counted as stale and left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from ragbench.inputs.tables import TableError, jsonl_records, load_yaml, read_utf8
from ragbench.report.pages import rows_to_html_table, rows_to_text
from ragbench.stats.inference import cohen_kappa

COMBINED = "combined"
YAML_SUFFIXES = {".yaml", ".yml"}
JSONL_SUFFIXES = {".jsonl"}

Text = Annotated[str, StringConstraints(strict=True, strip_whitespace=True, min_length=1)]


class LabelError(ValueError):
    """An unreadable or invalid labels file; the message names the file and the entry."""


class CandidateLabel(BaseModel):
    """A person's verdict on one generated candidate."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: Text
    question: Text  # the question the verdict was given on
    human_keep: bool  # True: the case belongs in the eval set
    reason: Text


class FilterAgreement(BaseModel):
    """One filter's keep/reject decisions against the person's labels."""

    filter: str
    labelled: int  # candidates with both a decision and a (current) label
    true_keep: int  # kept, and the person would keep it
    false_keep: int  # kept, but the person would reject it
    false_reject: int  # rejected, but the person would keep it
    true_reject: int  # rejected, and the person would reject it
    precision: float | None  # true_keep / kept; None when nothing labelled was kept
    recall: float | None  # true_keep / good; None when no labelled case is good
    kappa: float | None  # Cohen's kappa of keep/reject vs human_keep; None when undefined
    unlabelled: int  # decided candidates without a label: left out
    stale_labels: int  # labels whose question no longer matches the candidate's: left out
    disagreements: list[dict[str, Any]]  # id, question, decision ("kept"/"rejected"), human_keep, reason


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def load_labels(path: str | Path) -> dict[str, CandidateLabel]:
    """The labels of a .yaml/.yml file (a list of entries, or a mapping with a `labels` list) or a .jsonl
    file (one entry per line), by candidate id. LabelError (a ValueError) naming the file and the entry
    for an unreadable file, an entry that is not a mapping, a missing, extra or mistyped field, an empty
    reason, or two labels for one id."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in YAML_SUFFIXES | JSONL_SUFFIXES:
        raise LabelError(f"{path}: unsupported labels format (use .yaml, .yml or .jsonl)")
    if not path.is_file():
        raise LabelError(f"{path}: labels file not found")
    try:
        text = read_utf8(path)
        entries = _yaml_entries(text, path) if suffix in YAML_SUFFIXES else _jsonl_entries(text, path)
    except TableError as error:
        raise LabelError(str(error)) from None
    if not entries:
        raise LabelError(f"{path}: no labels found")
    labels: dict[str, CandidateLabel] = {}
    where_of: dict[str, str] = {}
    for where, raw in entries:
        if not isinstance(raw, dict):
            raise LabelError(f"{path}: {where}: expected a mapping with id, question, human_keep, reason")
        try:
            label = CandidateLabel.model_validate(raw)
        except ValidationError as error:
            named = f" (id {raw['id']!r})" if isinstance(raw.get("id"), str) else ""
            raise LabelError(f"{path}: {where}{named} is invalid: {_problems(error)}") from None
        if label.id in labels:
            raise LabelError(
                f"{path}: {where}: duplicate label for candidate id {label.id!r} "
                f"(first at {where_of[label.id]})"
            )
        labels[label.id] = label
        where_of[label.id] = where
    return labels


def _yaml_entries(text: str, path: Path) -> list[tuple[str, Any]]:
    loaded = load_yaml(text, path)
    if isinstance(loaded, dict) and set(loaded) == {"labels"}:
        loaded = loaded["labels"]
    if loaded is None:
        return []
    if not isinstance(loaded, list):
        raise LabelError(f"{path}: expected a list of labels, got {type(loaded).__name__}")
    return [(f"label #{position}", raw) for position, raw in enumerate(loaded, start=1)]


def _jsonl_entries(text: str, path: Path) -> list[tuple[str, Any]]:
    try:
        return [(f"line {number}", record) for number, record in jsonl_records(text, path)]
    except TableError as error:
        raise LabelError(str(error)) from None


def _problems(error: ValidationError) -> str:
    """Pydantic's errors as `field: message` (e.g. `reason: Field required`)."""
    parts = []
    for problem in error.errors():
        field = ".".join(str(part) for part in problem["loc"]) or "entry"
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            message = "unknown field (allowed: id, question, human_keep, reason)"
        elif problem["type"] == "string_too_short":
            message = "must not be empty"
        parts.append(f"{field}: {message}")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------------


def normalised_question(question: str) -> str:
    """A question as labels are matched on: whitespace collapsed, case folded."""
    return " ".join(question.split()).casefold()


def measure_filters(
    decisions: Mapping[str, Mapping[str, bool]],
    labels: Mapping[str, CandidateLabel],
    questions: Mapping[str, str | None],
) -> list[FilterAgreement]:
    """One row per filter, in the given order, then a "combined" row (a candidate is kept when every
    filter that decided on it kept it). `decisions`: filter -> candidate id -> kept; `questions`:
    candidate id -> the candidate's question.

    A decided candidate without a label counts as `unlabelled`; one whose label's question does not
    match the candidate's (or whose question is unknown) counts as `stale_labels`; neither is measured.
    """
    if COMBINED in decisions:
        raise ValueError(f"a filter must not be named {COMBINED!r}: that name is the combined row")
    rows = [_measure(name, by_id, labels, questions) for name, by_id in decisions.items()]
    if decisions:
        combined: dict[str, bool] = {}
        for by_id in decisions.values():
            for candidate_id, kept in by_id.items():
                combined[candidate_id] = combined.get(candidate_id, True) and bool(kept)
        rows.append(_measure(COMBINED, combined, labels, questions))
    return rows


def _measure(
    name: str,
    kept_by_id: Mapping[str, bool],
    labels: Mapping[str, CandidateLabel],
    questions: Mapping[str, str | None],
) -> FilterAgreement:
    counts = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}  # (kept, good)
    pairs: list[tuple[bool, bool]] = []
    disagreements: list[dict[str, Any]] = []
    unlabelled = stale = 0
    for candidate_id, kept in kept_by_id.items():
        label = labels.get(candidate_id)
        if label is None:
            unlabelled += 1
            continue
        question = questions.get(candidate_id)
        if question is None or normalised_question(question) != normalised_question(label.question):
            stale += 1
            continue
        kept = bool(kept)
        counts[kept, label.human_keep] += 1
        pairs.append((kept, label.human_keep))
        if kept != label.human_keep:
            disagreements.append(
                {
                    "id": candidate_id,
                    "question": question,
                    "decision": "kept" if kept else "rejected",
                    "human_keep": label.human_keep,
                    "reason": label.reason,
                }
            )
    true_keep, false_keep = counts[True, True], counts[True, False]
    false_reject, true_reject = counts[False, True], counts[False, False]
    kept_total, good_total = true_keep + false_keep, true_keep + false_reject
    return FilterAgreement(
        filter=name,
        labelled=len(pairs),
        true_keep=true_keep,
        false_keep=false_keep,
        false_reject=false_reject,
        true_reject=true_reject,
        precision=true_keep / kept_total if kept_total else None,
        recall=true_keep / good_total if good_total else None,
        kappa=cohen_kappa(pairs),
        unlabelled=unlabelled,
        stale_labels=stale,
        disagreements=disagreements,
    )


# --------------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------------

HOW_TO_READ = (
    "Each row compares a filter's keep/reject decisions with a person's verdicts on the same candidates. "
    "Precision: of the labelled cases the filter kept, the share the person would keep (low: bad cases "
    "get into the eval set). Recall: of the cases the person would keep, the share the filter kept (low: "
    "good cases are thrown away). Kappa: Cohen's agreement on keep/reject beyond chance (1 full "
    "agreement, 0 no better than chance, n/a when undefined, e.g. everything kept and every case good). "
    f"'{COMBINED}' keeps a case only when every filter that decided on it kept it: the eval set you get. "
    "Candidates without a label, and labels whose question no longer matches the candidate's (stale: "
    "re-label them), are left out and counted."
)


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _summary_rows(rows: list[FilterAgreement]) -> list[dict[str, str | int]]:
    return [
        {
            "filter": row.filter,
            "labelled": row.labelled,
            "kept good": row.true_keep,
            "kept bad": row.false_keep,
            "rejected good": row.false_reject,
            "rejected bad": row.true_reject,
            "precision": _number(row.precision),
            "recall": _number(row.recall),
            "kappa": _number(row.kappa),
            "unlabelled": row.unlabelled,
            "stale labels": row.stale_labels,
        }
        for row in rows
    ]


def _stale_warning(rows: list[FilterAgreement]) -> str | None:
    stale = max((row.stale_labels for row in rows), default=0)
    if not stale:
        return None
    return (
        f"{stale} label(s) no longer match their candidate's question and were left out: the set was "
        "re-generated since they were written; re-label those candidates."
    )


def agreement_text(rows: list[FilterAgreement]) -> str:
    """The terminal's view: one line per filter, and a warning when labels are stale."""
    if not rows:
        return "(no filter decisions to measure)"
    text = rows_to_text(_summary_rows(rows))
    warning = _stale_warning(rows)
    return f"{text}\n{warning}" if warning else text


def agreement_html(rows: list[FilterAgreement]) -> str:
    """An HTML fragment: heading, how to read it, the table, then each filter's disagreements with the
    person's reason. Every string is escaped (questions and reasons come from models and people)."""
    parts = [
        f"<h2>{escape('Eval-set filters vs human labels')}</h2>",
        f'<p class="note">{escape(HOW_TO_READ)}</p>',
    ]
    if not rows:
        parts.append(f'<p class="note">{escape("(no filter decisions to measure)")}</p>')
        return "".join(parts)
    warning = _stale_warning(rows)
    if warning:
        parts.append(f'<p class="warning">{escape(warning)}</p>')
    parts.append(rows_to_html_table(_summary_rows(rows)))
    for row in rows:
        if not row.disagreements:
            continue
        parts.append(f"<h3>{escape(f'{row.filter}: {len(row.disagreements)} disagreement(s)')}</h3>")
        parts.append(
            rows_to_html_table(
                [
                    {
                        "id": item["id"],
                        "question": item["question"],
                        "filter": item["decision"],
                        "person": "keep" if item["human_keep"] else "reject",
                        "person's reason": item["reason"],
                    }
                    for item in row.disagreements
                ]
            )
        )
    return "".join(parts)
