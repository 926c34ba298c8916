# `make run` and `make test` each set up their own virtual environment from the pinned requirements.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready
export ZENML_ANALYTICS_OPT_IN := false
export TOKENIZERS_PARALLELISM := false
export LITELLM_LOCAL_MODEL_COST_MAP := True
# llama-cpp-python builds from source; this keeps the build portable across x86-64 CPUs with AVX2.
export CMAKE_ARGS := -DGGML_NATIVE=OFF

.PHONY: setup run test test-fast lint browser postgres bench clean test-docker docs reference ragas-venv ppi-venv

setup: $(READY) ragas-venv ppi-venv

$(READY): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -r requirements.txt -r requirements-dev.txt
	$(BIN)/pip check
	# colbert-ai compiles a small C++ extension the first time a checkpoint loads (~50 s); build it now,
	# with colbert-ai's own loader, so the first benchmark run does not pay for it.
	$(BIN)/python -c "from colbert.modeling.colbert import ColBERT; ColBERT.try_load_torch_extensions(use_gpu=False)"
	touch $@

# A reference implementation in an environment of its own, every package pinned in
# tests/conformance/requirements-<name>.txt, for a conformance test to run it beside ragbench:
# .venv-ragas: ragas 0.4.3 (its langchain is not ours): tests/system/test_ragas_conformance.py scores the same
#   scripted cases with it and with ragbench's scorers;
# .venv-ppi: ppi_py (ppi-python 0.2.3), the reference code of PPI++ (its numba pins numpy to a window of
#   releases): tests/system/test_ppi_conformance.py checks ragbench.stats.ppi against it.
.venv-%/.ready: tests/conformance/requirements-%.txt
	$(PYTHON) -m venv .venv-$*
	.venv-$*/bin/pip install --quiet -r $<
	.venv-$*/bin/pip check
	touch $@

ragas-venv: .venv-ragas/.ready
ppi-venv: .venv-ppi/.ready

run: $(READY)
	$(BIN)/python run.py $(ARGS)

lint: $(READY)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The dashboard and review-page tests drive a real Chromium: install Debian's package when it is missing and we can
# (root with apt-get); otherwise those tests are skipped and say why.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	      || echo "could not install chromium: the browser tests will be skipped"; \
	  else echo "no chromium and no root apt-get: the browser tests will be skipped"; fi; }

# The shared LLM cache tests run a real PostgreSQL server: install Debian's package when it is missing and
# we can (root with apt-get); otherwise those tests are skipped and say why.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's postgresql for the shared LLM cache tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
	      || echo "could not install postgresql: the shared LLM cache tests will be skipped"; \
	  else echo "no postgresql and no root apt-get: the shared LLM cache tests will be skipped"; fi; }

test: lint browser postgres ragas-venv ppi-venv
	$(BIN)/python -m pytest -v --durations=15

# The unit tier only (tests/unit: no pipeline, model file, server or subprocess): a few minutes, for the
# edit-test loop. `make test` runs it with the integration and system tiers.
test-fast: $(READY)
	$(BIN)/python -m pytest -q tests/unit

# The documentation site (mkdocs.yml, docs/), rebuilt on every change, on 127.0.0.1 only;
# tests/system/test_docs.py builds it with --strict.
docs: $(READY)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:8000

# The reference pages under docs/ (config keys, command line, metrics, Python API, the container image),
# committed Markdown generated from the code: rerun after changing what they show.
# tests/unit/test_reference_pages.py fails when one is stale (`docs/generate_reference.py --check` says which).
reference: $(READY)
	$(BIN)/python docs/generate_reference.py

bench: $(READY)
	$(BIN)/python bench/bench_index_build.py
	$(BIN)/python bench/bench_llm_concurrency.py
	HF_HUB_OFFLINE=1 $(BIN)/python bench/bench_colbert_rerank.py
	$(BIN)/python bench/bench_statement_judge.py  # the local 1.5B judge against a person's labels
	$(BIN)/python bench/bench_local_prefix.py  # the local judge's prompt-prefix reuse: speed, same replies
	$(BIN)/python bench/bench_racing.py  # racing cells: best kept, false eliminations, share of calls
	$(BIN)/python bench/bench_ppi.py  # label-corrected estimates: coverage, width against labels alone (~4 min)
	$(BIN)/python bench/bench_label_replay.py  # the review example's readers corrected by sampled labels
	$(BIN)/python bench/bench_trained_reranker.py  # a reranker trained on the knowledge base vs no reranking (~20 min)
	$(BIN)/python bench/bench_scale.py  # 1-2 h on 2 cores; installs linux-doc-6.1 with apt-get as root

clean:
	rm -rf $(VENV) output

# The benchmark under ZenML's local_docker orchestrator (tests/docker): docker/build.sh installs Docker and
# debootstrap when missing, starts dockerd and builds the image (cached layers make a rebuild fast); the
# tests then fail rather than skip if they cannot run. dockerd, if build.sh started it, is stopped after
# (KEEP_DOCKERD=1 keeps it).
test-docker: $(READY) postgres
	docker/build.sh
	RAGBENCH_REQUIRE_DOCKER=1 $(BIN)/python -m pytest -v -rA --durations=10 -m docker tests/docker; \
	  status=$$?; [ "$(KEEP_DOCKERD)" = 1 ] || docker/build.sh --stop-dockerd; exit $$status
