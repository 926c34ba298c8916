"""The project's single LLM client: every LLM call (reader, judge, ...) goes through `LLMClient`.

Importing this package is cheap (it imports no module of its own, so a step that needs only the settings
types does not depend on the client); litellm (seconds to import) and llama-cpp-python load on first use.
The client is `ragbench.llm.client.LLMClient`, its settings `ragbench.llm.types.LLMSettings`.

May import: ragbench.models. (The packaged GGUF comes from it; prompt files are read with
ragbench.inputs.tables, one of the foundation modules of `ragbench.layering`.)

    settings = LLMSettings(model="local/qwen2.5-coder-1.5b-instruct")
    client = LLMClient(settings)
    result = client.complete([{"role": "user", "content": "..."}], response_schema=Verdict)
    if result.ok: use(result.parsed)
"""

from ragbench import submodules_as_attributes

__getattr__ = submodules_as_attributes(__name__)
