"""The report's section on label-corrected numbers: each judged metric's prediction-powered estimate per
cell beside the judge-only and labels-only means, how many labels it rests on and is worth, what was left
out, and how many labels would bring the intervals under the width the user plans for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from ragbench.analysis.labelled import CorrectedMetric, LabelCorrection, corrected_key, is_corrected_key
from ragbench.report.pages import interval_cell, rows_to_html_table
from ragbench.report.view import ReportInput
from ragbench.scoring.metrics import metric_key


def corrected_rows(metric: CorrectedMetric, names: dict[str, str], width: float) -> list[dict]:
    rows = []
    for cell, e in metric.estimates.items():
        rows.append(
            {
                "cell": names.get(cell, cell),
                "judge alone": round(e.judge_mean, 3),
                "labels alone": "" if e.labels_mean is None else round(e.labels_mean, 3),
                "labels-alone interval": interval_cell(e.labels_low, e.labels_high, decimals=3),
                "corrected": "" if e.estimate is None else round(e.estimate, 3),
                "corrected interval": interval_cell(e.low, e.high, decimals=3) or e.why_no_interval,
                "used": "" if e.estimate is None else e.source,
                "labels": e.labels,
                "answers": e.answers,
                "worth (labels)": "" if e.effective_labels is None else round(e.effective_labels, 1),
                "judge weight": "" if e.judge_weight is None else round(e.judge_weight, 2),
                f"labels for width {width:g}": metric.labels_needed.get(cell) or "",
            }
        )
    return rows


def ceiling_text(metric: CorrectedMetric) -> str:
    """What the judge can save at best: with correlation rho to the person, one label plus the judge's
    verdicts on many answers is worth at most 1/(1 - rho^2) labels; and, where its verdicts would have
    widened a cell's interval at these labels, that the labels alone are used there."""
    alone = [cell for cell, e in metric.estimates.items() if e.estimate is not None and not e.judge_used]
    if alone and len(alone) == len(metric.estimates):
        return (
            "The judge is WEAK here: at these labels its verdicts would widen every cell's interval, so "
            "the numbers are the labels alone (column used). " + _ceiling_text(metric)
        )
    if alone:
        return (
            f"In {len(alone)} of {len(metric.estimates)} cell(s) the judge's verdicts would widen the "
            "interval "
            "at these labels, so there the numbers are the labels alone (column used). "
            + _ceiling_text(metric)
        )
    return _ceiling_text(metric)


def _ceiling_text(metric: CorrectedMetric) -> str:
    if metric.ceiling is None:
        return "The judge's scores or the labels do not vary on the labelled answers: no ceiling to state."
    if metric.ceiling < 1.5:
        return (
            f"The judge is WEAK here: its verdicts make a label worth at most {metric.ceiling:.2f} labels "
            "(1/(1 - rho^2) for its correlation rho with the person), so they cannot save even a third of "
            "the labels: more labels, not more judging, narrow these intervals."
        )
    return (
        "At best (very many unlabelled answers) the judge's verdicts make a label worth "
        f"{metric.ceiling:.2f} "
        "labels (1/(1 - rho^2) for its correlation rho with the person on the labelled answers)."
    )


def label_correction_lines(
    correction: LabelCorrection | None, configured: Sequence[str], names: Mapping[str, str]
) -> list[str]:
    """The terminal's account of label correction: per corrected metric, the labels used and why the others
    were left out (where the sample ends, and what to do there); the labels no sample can use; and each
    corrected metric the config asks for that no label reached."""
    asked = [key for key in configured if is_corrected_key(key)]
    if correction is None and not asked:
        return []
    lines = ["", "Label correction (the judge's numbers corrected by a person's labels of a random sample):"]
    metrics = correction.metrics if correction is not None else []
    for metric in metrics:
        lines += [f"  {line}" for line in metric.lines(names)]
    lines += [f"  {note}" for note in (correction.notes if correction is not None else [])]
    found = {corrected_key(metric_key(metric.column)) for metric in metrics}
    lines += [
        f"  {key}: no label drawn in a sample order reached this run: its numbers are the judge's alone"
        for key in asked
        if key not in found
    ]
    return lines


def label_correction_section(report: ReportInput) -> str:
    correction: LabelCorrection | None = report.label_correction
    if correction is None:
        return ""
    names = {row["cell"]: row["label"] for row in report.rows}
    parts = [
        '<h2 id="label-corrected">Label-corrected numbers</h2>',
        '<p class="note">A person labelled a random sample of the answers (the review page\'s sample '
        "order, each label drawn with a known probability). Each judged mean is corrected by the judge's "
        "average error on that sample (prediction-powered inference, PPI++ with the judge's weight tuned; "
        "inverse-probability weighted when the sample favoured uncertain answers): its interval holds "
        "whatever the judge's quality, and a good judge narrows it. <b>judge alone</b>: the raw mean; "
        "<b>labels alone</b>: the person's labels only; <b>worth</b>: how many labels alone would give the "
        "corrected interval's width. The verdicts on these metrics use the corrected numbers.</p>",
    ]
    for note in correction.notes:
        parts.append(f'<p class="warning">{escape(note)}</p>')
    for metric in correction.metrics:
        drawn = "weighted towards uncertain answers" if metric.weighted else "uniform"
        lines = [
            f"Sample plan {escape(metric.plan)} ({drawn}): {metric.sampled_cases} of {metric.cases} cases "
            "labelled for every cell's answer.",
            escape(ceiling_text(metric)),
            *([escape(ended[0].upper() + ended[1:] + ".")] if (ended := metric.ended_sentence()) else []),
            *(f"Left out: {escape(why)}." for why in metric.left_out),
        ]
        table = rows_to_html_table(corrected_rows(metric, names, correction.target_width))
        parts.append(
            f'<h3>{escape(metric.label)}</h3><p>{"<br>".join(lines)}</p><div class="scroll">{table}</div>'
        )
    judge_only = [v for v in report.judge_only_verdicts]
    if judge_only:
        parts.append("<p>What the judge alone would have said:</p><ul>")
        parts += [f"<li>{escape(v.sentence())}</li>" for v in judge_only]
        parts.append("</ul>")
    return "".join(parts)
