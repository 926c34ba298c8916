"""`run.py init`: a config a new user can copy anywhere and run, with every choice explained.

It names its own history (the file's stem, never the default's), resolves nothing against the repository
(the knowledge base and eval cases it uses by default are the packaged ones, and the paths it shows are
relative to the config file), and writes its outputs beside itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from ragbench.config.model import CONFIG_NAME, CONFIG_NAME_RULE, suggested_name
from ragbench.config.reference import SCHEMA_PATH
from ragbench.llm.local import DEFAULT_LOCAL_LLM

STARTER = """\
# yaml-language-server: $schema={schema}
# {name}: a RAG benchmark config (ragbench). Run it from any folder (`python run.py` in a clone works too):
#   ragbench --config {file} --dry-run     # what would run, and what it would cost, without running
#   ragbench --config {file}               # the benchmark; the report lands in output/ beside this file
# Every key and its default: ragbench config --reference (or the docs site: make docs). The first line
# gives an editor the config's JSON Schema (ragbench config --schema), to complete and check keys.
name: {name}                    # this config's history: its runs, gate baseline, champion and schedule

# What the answers come from. The packaged default is CPython's language reference (offline). Yours:
#   knowledge_base: {{kind: folder, path: docs}}   # .md .txt .rst .html files; paths relative to this file
#   knowledge_base: {{kind: file, path: kb.jsonl, text_column: text, source_column: source}}
knowledge_base:
  kind: pydoc_topics

# The questions, with what a right answer must say. Left out, the 63 packaged cases on the language
# reference are used; yours (YAML or JSONL, one case per item: id, question, reference_answer,
# expected_sources, good_words, bad_words, tags):
#   eval_cases: cases.yaml

# The grid: every list is an axis and the run is their product; one value may be written alone.
grid:
  chunk_size: [256]
  retriever: [dense]            # dense, bm25 or hybrid
  embedding_model: [sentence-transformers/all-MiniLM-L6-v2]
  top_k: [30]                   # candidates retrieved
  top_n: [3]                    # passages the reader sees
  # The reader answers, the judge grades. Offline: a local 1.5B model that installs from PyPI. Hosted:
  # any litellm name (openai/gpt-4o-mini, anthropic/..., ollama/llama3), its key in the environment.
  reader: [{llm}]
  judge: [{llm}]

generation:
  sample_size: 3                # end-to-end cases per cell (retrieval: every case); raise it to rank:
                                # the first N of a seeded case order, so a larger N only adds cases
evaluation:
  rubrics: [correctness]        # add context (faithfulness, relevance, ...) with a stronger judge
  # metrics: [faithfulness, answer_correctness]   # the Ragas family, statement by statement
  judge_check: {{cases: 4}}      # the judge card: the judge graded on errors planted in 4 references
                                # first (8 unless set; more cases narrow its intervals)

output_dir: output              # relative to this file
"""


def starter_config(path: Path) -> str:
    """The starter config for `path`, named after the file; ValueError when the file name is no valid
    config name (the name keys the config's history, so it must be one)."""
    name = path.stem
    if not re.match(CONFIG_NAME, name):
        raise ValueError(
            f"{path.name}: the file name {name!r} is the config's name and is not valid "
            f"({CONFIG_NAME_RULE}); try {suggested_name(name)}.yaml"
        )
    return STARTER.format(name=name, file=path.name, llm=DEFAULT_LOCAL_LLM, schema=SCHEMA_PATH.as_uri())


def write_starter(path: Path) -> Path:
    """Write the starter config to `path` (refusing to overwrite a file), creating its folder."""
    if path.exists():
        raise FileExistsError(f"{path} exists: init never overwrites a config; choose another file name")
    text = starter_config(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
