"""Every content digest the project persists (artifact content hashes, cell ids, the eval set's and the
knowledge base's fingerprints, LLM cache keys, the labels' snapshot digest, reference and training-data
fingerprints), pinned to the value it had before the sites shared `ragbench.hashing`: a changed value would
recompute steps, orphan the LLM cache and break lined-up runs. Recorded on main before the change."""

from datetime import date

from materializers.inputs import EvalSuiteMaterializer, _content_hash
from materializers.json_models import CorpusMaterializer, JsonModelMaterializer
from ragbench.grid.cell import CellSpec
from ragbench.hashing import seeded_rank
from ragbench.inputs.eval_cases import EvalCase, EvalSuite
from ragbench.inputs.knowledge_base import Corpus, Document, documents_digest, knowledge_base_fingerprint
from ragbench.inputs.references import ReferenceResolutions, ResolvedReference
from ragbench.llm.cache import cache_key
from ragbench.review.labels import Label, ReviewLabels, text_sha
from ragbench.scoring.rubrics import JudgeInput
from ragbench.training.pairs import TrainingExample, TrainingPairs

TEXT = "héllo wörld ✓"
docs = [Document(text=TEXT, source="a/é.md"), Document(text="zwei\0drei", source="b.md")]
corpus = Corpus(documents=docs, fingerprint="f", description="here")
cases = [EvalCase(id="c1", question=TEXT), EvalCase(id="c2", question="q", reference_answer="ä")]
suite = EvalSuite.of(cases, label="file")
spec = CellSpec(chunk_size=128, chunk_overlap=13, embedding_model="m", top_k=5)
label = Label(
    case_id="c1",
    answer_sha=text_sha("ä"),
    rubric="r",
    criterion="k",
    value=3,
    item=JudgeInput(case_id="c1", question=TEXT, answer="ä"),
    labelled_at="2026-01-01T00:00:00Z",
)
refs = ReferenceResolutions(
    resolutions=[
        ResolvedReference(
            case_id="c1", field="reference_answer", source="s", gives="answer", resolved_at="t", value=TEXT
        )
    ]
)
pairs = TrainingPairs(
    chunk_set_fingerprint="cs",
    knowledge_base="kb",
    training=[
        TrainingExample(question=TEXT, origin="o", chunk=1, source="s", positive="p", negatives=[2, 3])
    ],
    validation=[],
    validation_sources=[],
    held_out_cases=[],
    dropped_as_leaks=[],
    dropped_by_roundtrip=0,
    generator_errors=[],
)

RECORDED = {
    "content_hash": "806659b14cd3bd8462c455816f7c820aa2ba2ecb1ae0472e4a9c7ca09e1ee3fe",
    "eval_suite_materializer": "ee967f3f6df4bdce175174514b03591264ef3020e6ba0f0888c79aaf9274948c",
    "json_model_materializer": "489ff6836da76a47af65ed68be381d47ff4deea32df6baa70235b9b3df9e807b",
    "corpus_materializer": "506647a54cb183a174ca73ebfb1c6852163d61f199881e610f1c5aa23c7a4df7",
    "cell_digest": "38166bfe",
    "cell_id": "cs128_o13_m_k5_38166bfe",
    "seeded_rank": "4dd4e247e31207b7b835697b35a1b3a48f84f99f15dd06f498ac72a3b64f7395",
    "eval_fingerprint": "df090b8a8db625e5",
    "documents_digest": "2b5b476fcd603c74412ffc77698a6eca9943b54dc5bb616e2cae3048d4f837d6",
    "kb_fingerprint": "2b5b476fcd603c74",
    "cache_key": "8608b815d450fd6c1c959a02131de1fd22a275c0cd29ad81581360e5acf54d05",
    "labels_digest": "628f85766c849f54872da880dc1aea33f44b132acfd37dc0a4e1a4b581739c89",
    "reference_digests": "{'c1': '80e8dcb71bc8bd79'}",
    "training_fingerprint": "17700e6fbcb6f3db",
}


def _computed() -> dict[str, str]:
    return {
        "content_hash": _content_hash(EvalSuiteMaterializer, {"b": [1, TEXT], "a": None}),
        "eval_suite_materializer": EvalSuiteMaterializer.compute_content_hash(
            object.__new__(EvalSuiteMaterializer), suite
        ),
        "json_model_materializer": JsonModelMaterializer.compute_content_hash(
            object.__new__(JsonModelMaterializer), corpus
        ),
        "corpus_materializer": CorpusMaterializer.compute_content_hash(
            object.__new__(CorpusMaterializer), corpus
        ),
        "cell_digest": spec.digest,
        "cell_id": spec.id,
        "seeded_rank": seeded_rank(7, "c1").hex(),
        "eval_fingerprint": suite.fingerprint,
        "documents_digest": documents_digest(docs),
        "kb_fingerprint": knowledge_base_fingerprint(docs),
        "cache_key": cache_key({"model": "m", "prompt": TEXT, "temperature": 0.0, "when": date(2026, 1, 2)}),
        "labels_digest": ReviewLabels(labels=[label]).digest,
        "reference_digests": str(refs.digests()),
        "training_fingerprint": pairs.fingerprint,
    }


def test_every_digest_keeps_the_value_it_was_recorded_with():
    assert _computed() == RECORDED
