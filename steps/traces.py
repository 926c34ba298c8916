from typing import Annotated

from zenml import log_metadata, step

from ragbench.analysis.annotations import TraceAnnotations, trace_annotations
from ragbench.analysis.results import CaseRecords
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.inputs.phoenix import PhoenixClient, PhoenixSource
from steps.judge import RubricSet


@step(enable_cache=False)
def write_trace_annotations(
    case_records: CaseRecords,
    eval_suite: EvalSuite,
    cells: list[str],
    rubrics: RubricSet,
    path: str | None,
    phoenix: PhoenixSource | None = None,
) -> Annotated[TraceAnnotations, "trace_annotations"]:
    """The scores of the logged answers (`cells`: the `traces` systems' cells) as annotations keyed by span
    id, an artifact and, when `path` is set, that JSON Lines file (replaced whole); with `phoenix` (the
    server the traces came from, `annotate` on) also its span annotations. Never cached: the file and the
    server are written by every run, so they always hold the latest run's scores. A server that cannot
    take them fails the step (and so the run), naming why: scores never silently stay behind."""
    annotations = trace_annotations(case_records, eval_suite.cases, cells, rubrics.rubrics)
    if path is not None:
        annotations.write(path)
    sent = 0
    if phoenix is not None and phoenix.annotate:
        with PhoenixClient(phoenix) as client:
            sent = client.annotate(annotations.phoenix_data())
    log_metadata(
        {
            "annotations": len(annotations.annotations),
            "annotations_path": path or "",
            "phoenix_annotations": sent,
        }
    )
    return annotations
