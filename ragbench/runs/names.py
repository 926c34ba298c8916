"""The names by which runs and their outputs are found in the ZenML store: one place, read by the pipeline
definitions, the steps that look up earlier runs and `run.py` (which must not import the steps to know
them: that would import ZenML and every model library at start-up)."""

BENCHMARK_PIPELINE = "rag_benchmark"
TESTSET_PIPELINE = "rag_testset"
TRAIN_RERANKER_PIPELINE = "rag_train_reranker"
RESULTS_STEP = "build_results_table"
GATE_STEP = "regression_gate"
EVAL_SET_STEP = "assemble_eval_set"
EVAL_CASES_STEP = "load_eval_suite"
RESOLVED_CASES_STEP = "resolve_references"  # the cases as the run used them (references fetched)
REVIEW_LABELS_ARTIFACT = "review_labels"  # what the review page publishes, one version per changed set
