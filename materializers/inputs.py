"""The run's read-in inputs that steps consume, keyed (content hash) on what decides the steps' results only.

ZenML keys a step on its input artifacts' content hashes. These artifacts also carry words for people that
change from run to run or machine to machine; hashing them would recompute steps whose results cannot
change. The pipeline gives them to the input steps explicitly (`with_options(output_materializers=...)`);
importing this module also registers them for their types, as ZenML does with every materializer class.
Only the pipeline module imports it, so no step's cache key depends on this module.
"""

from __future__ import annotations

from typing import Any, ClassVar

from materializers.json_models import JsonModelMaterializer
from ragbench.hashing import canonical_json, sha256_hex
from ragbench.inputs.eval_cases import EvalSuite
from ragbench.retrieval.rerank import RerankerChoice


def _content_hash(materializer: type, payload: Any) -> str:
    return sha256_hex([materializer.__name__, "\0", canonical_json(payload)])


class EvalSuiteMaterializer(JsonModelMaterializer):
    """An eval suite is its cases: `label` (which file, dataset or artifact they came from) is shown in the
    report but not hashed, so a moved or renamed eval file recomputes nothing."""

    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (EvalSuite,)

    def compute_content_hash(self, data: EvalSuite) -> str:
        """Cases read from traces hash what was logged and the reading; other suites hash as they did
        before traces existed (those fields left out at their default), so no cached step recomputes."""
        exclude: dict[str, Any] = {"label": True}
        if data.traces is None:
            exclude["traces"] = True
        if all(case.logged is None for case in data.cases):
            exclude["cases"] = {"__all__": {"logged"}}
        return _content_hash(type(self), data.model_dump(mode="json", exclude=exclude))

    def extract_metadata(self, data: EvalSuite) -> dict[str, Any]:
        return {"cases": len(data.cases), "eval_fingerprint": data.fingerprint, "label": data.label}


class RerankerChoiceMaterializer(JsonModelMaterializer):
    """A reranker choice is the checkpoint it uses (`RerankerChoice.identity`): why it was chosen (the Hub's
    error text, which differs between machines) is kept with it, not hashed."""

    ASSOCIATED_TYPES: ClassVar[tuple[type[Any], ...]] = (RerankerChoice,)

    def compute_content_hash(self, data: RerankerChoice) -> str:
        return _content_hash(type(self), data.identity())

    def extract_metadata(self, data: RerankerChoice) -> dict[str, Any]:
        return {"checkpoint": data.used, "label": data.label, "is_standin": data.is_standin}
