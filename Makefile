# `make run` and `make test` each set up their own virtual environment from the pinned requirements.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready
COLBERT_EXTENSION := $(VENV)/.colbert-extension
export ZENML_ANALYTICS_OPT_IN := false
export TOKENIZERS_PARALLELISM := false
export LITELLM_LOCAL_MODEL_COST_MAP := True
# Compiled modules are cached, under the venv (nothing lands in the clone), whatever the shell says: with
# PYTHONDONTWRITEBYTECODE=1 (set on some machines) and pip's --no-compile, every process would compile
# torch, transformers and ZenML from source again, ~12 s of CPU each; bench_scale.py's smoke run took 171 s
# that way and 65 s with the cache (measured 2026-12-03, docs/measured.md#make-test-from-a-fresh-clone).
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache
# llama-cpp-python builds from source: GGML_NATIVE=OFF keeps the build portable across x86-64 CPUs with
# AVX2; LLAVA_BUILD=OFF skips the multimodal library (54 of its ~335 compile units), which ragbench never
# loads (llama_cpp imports it only inside its image chat handlers).
export CMAKE_ARGS := -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF

.PHONY: setup run test test-setup test-slow test-slow-setup test-fast lint browser postgres debian-packages colbert-extension bench clean test-docker docs reference ragas-venv ppi-venv phoenix-venv

setup: $(READY) $(COLBERT_EXTENSION) ragas-venv ppi-venv

# --no-compile: pip would byte-compile all 28,700 modules it installs, one after another (110 s of one core,
# measured 2026-12-02); Python compiles those a run or a test imports, once, when it first imports them, into
# PYTHONPYCACHEPREFIX (above).
PIP_INSTALL := pip install --quiet --no-compile

# The project itself last, editable and without dependencies (the pinned ones are there): `ragbench` on the
# venv's PATH, the clone's root on its import path (no script edits sys.path). --no-build-isolation: the
# build backend is the venv's own setuptools, so nothing is fetched for the build.
$(READY): requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/$(PIP_INSTALL) -r requirements.txt -r requirements-dev.txt
	$(BIN)/$(PIP_INSTALL) --no-deps --no-build-isolation -e .
	$(BIN)/pip check
	touch $@

# colbert-ai compiles a small C++ extension the first time a checkpoint loads (~50 s); build it once the venv
# is there, with colbert-ai's own loader, so the first benchmark run does not pay for it. The build lands in
# torch's extension cache (~/.cache/torch_extensions), which torch locks while it builds.
colbert-extension: $(COLBERT_EXTENSION)
$(COLBERT_EXTENSION): $(READY)
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
	.venv-$*/bin/$(PIP_INSTALL) -r $<
	.venv-$*/bin/pip check
	touch $@

ragas-venv: .venv-ragas/.ready
ppi-venv: .venv-ppi/.ready

# Arize Phoenix in an environment of its own, every package pinned in tests/phoenix/requirements-phoenix.txt:
# the traces tests start a real Phoenix server (tests/phoenix_server.py) and run an OpenInference-instrumented
# LangChain RAG app (tests/phoenix/rag_app.py) that exports its spans to it, then read them back. Its own
# explicit rule, which GNU make prefers to the conformance venvs' pattern rule above.
.venv-phoenix/.ready: tests/phoenix/requirements-phoenix.txt
	$(PYTHON) -m venv .venv-phoenix
	.venv-phoenix/bin/$(PIP_INSTALL) -r $<
	.venv-phoenix/bin/pip check
	touch $@

phoenix-venv: .venv-phoenix/.ready

run: $(READY) $(COLBERT_EXTENSION)
	$(BIN)/python run.py $(ARGS)

lint: $(READY)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Debian's packages some tests need: chromium (the dashboard and review-page tests drive a real browser) and
# postgresql (the shared LLM cache tests run a real server). The missing ones are installed with one
# apt-get when we can (root with apt-get); otherwise those tests are skipped and say why.
# `make browser` and `make postgres` install one of them, `make debian-packages` both.
have_chromium := command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1
have_postgresql := ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
define install_debian_packages
	@missing=""; \
	$(foreach package,$(1),{ $(have_$(package)); } || missing="$$missing $(package)";) \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's$$missing for the tests that use them"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null \
	    || echo "could not install$$missing: the tests that use them will be skipped"; \
	else echo "no$$missing and no root apt-get: the tests that use them will be skipped"; fi
endef

browser:
	$(call install_debian_packages,chromium)

postgres:
	$(call install_debian_packages,postgresql)

debian-packages:
	$(call install_debian_packages,chromium postgresql)

# The suite's set-up in one make with several jobs, as its parts are independent: the main venv (then ruff
# and colbert's extension) and Debian's packages (one apt-get: dpkg takes one lock); the slow tier's also
# builds the two conformance venvs and Phoenix's (its server and the instrumented LangChain app, for the
# traces tests). --output-sync keeps each part's output together.
test-setup: lint $(COLBERT_EXTENSION) debian-packages
test-slow-setup: test-setup ragas-venv ppi-venv phoenix-venv

# Two pytest workers (pytest-xdist), one per core; --dist loadfile keeps a file's tests on one worker, so a
# module's fixtures (a pipeline run, a docs build, a server) are made once, and keeps collection order:
# the heavy integration and system files first, the many small unit files last to fill in.
PYTEST_WORKERS := -n 2 --dist loadfile --no-loadscope-reorder

test:
	$(MAKE) --no-print-directory --jobs=4 --output-sync=target test-setup
	$(BIN)/python -m pytest $(PYTEST_WORKERS) -v --durations=15

# The slow tier (tests marked `slow`: the local models' longer runs, every step in a fresh process, runs
# killed mid-way, the installed command, the browser and cron checks, the reference implementations in
# their own venvs): what `make test` leaves out to stay under 40 minutes from a fresh clone. CI runs both.
test-slow:
	$(MAKE) --no-print-directory --jobs=4 --output-sync=target test-slow-setup
	$(BIN)/python -m pytest $(PYTEST_WORKERS) -v --durations=15 -m slow

# The unit tier only (tests/unit: no pipeline, model file, server or subprocess): a few minutes, for the
# edit-test loop. `make test` runs it with the integration and system tiers.
test-fast: $(READY)
	$(BIN)/python -m pytest $(PYTEST_WORKERS) -q tests/unit

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
	$(BIN)/python bench/bench_search.py  # staged and model-based search vs grid, race, greedy (~40 min)
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
