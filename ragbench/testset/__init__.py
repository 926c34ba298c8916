"""Eval sets for any knowledge base (`run.py testset`): sample chunks, have a generator LLM write
question-answer cases from them (some evolved into harder ones, some unanswerable), have critic agents
rate each case, and keep those that pass, without near-duplicates.

- `rubrics`: the prompts and rating scales as data (one entry per evolution type and per critic);
- `plan`: which chunks seed which kind of case (seeded, no model);
- `generate`: the generator's calls; `critique`: the critics' calls;
- `assemble`: keyword candidates, the filter, de-duplication, and the `EvalSet` artifact;
- `roundtrip`, `labels`: the roundtrip filter, and filters measured against a person's labels;
- `settings`: the `testset` config section.

May import: ragbench.generation, ragbench.inputs, ragbench.llm, ragbench.report, ragbench.retrieval,
ragbench.scoring.
"""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
