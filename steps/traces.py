from typing import Annotated

from zenml import log_metadata, step

from ragbench.analysis.annotations import TraceAnnotations, trace_annotations
from ragbench.analysis.results import CaseRecords
from ragbench.inputs.eval_cases import EvalSuite
from steps.judge import RubricSet


@step(enable_cache=False)
def write_trace_annotations(
    case_records: CaseRecords,
    eval_suite: EvalSuite,
    cells: list[str],
    rubrics: RubricSet,
    path: str | None,
) -> Annotated[TraceAnnotations, "trace_annotations"]:
    """The scores of the logged answers (`cells`: the `traces` systems' cells) as annotations keyed by span
    id, an artifact and, when `path` is set, that JSON Lines file (replaced whole). Never cached: the file
    is written by every run, so it always holds the latest run's scores."""
    annotations = trace_annotations(case_records, eval_suite.cases, cells, rubrics.rubrics)
    if path is not None:
        annotations.write(path)
    log_metadata({"annotations": len(annotations.annotations), "annotations_path": path or ""})
    return annotations
