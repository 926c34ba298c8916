"""The offline default: GGUF models run in-process by llama-cpp-python, the provider ``local``.

`LocalProvider` serves ``local/<name>`` behind the same client (cache, retries, JSON handling, stats) as
any hosted model, without litellm: a dry run of local models never imports it. ``<name>`` is a packaged
GGUF model known to `ragbench.models.provision` (provisioned from PyPI on first use) or a path to a
``.gguf`` file.

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

import atexit
import functools
import inspect
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from ragbench.llm.provider import ErrorKind, LLMReadiness, Provider, ProviderReply
from ragbench.llm.types import LLMConfigError, Message

LOCAL_PREFIX = "local/"

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


class ContextWindowExceeded(ValueError):
    """The prompt and the reply do not fit the context the model is loaded with: this request fails."""


def run_local_chat(name: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """One chat completion on the local model, serialised per model; returns llama-cpp's OpenAI-style dict."""
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
                raise ContextWindowExceeded(str(error)) from error
            raise
        finally:
            loaded.prompt_pending = False


# How litellm counts the prompt of a model it has no tokenizer for (a local GGUF among them): cl100k_base,
# each text in chunks of this many characters, 3 tokens per message and 1 per name, 3 to prime the reply.
TIKTOKEN_ENCODING = "cl100k_base"
TIKTOKEN_CHUNK_CHARS = 1024
TOKENS_PER_MESSAGE, TOKENS_PER_NAME, REPLY_PRIMER_TOKENS = 3, 1, 3


@functools.cache
def _tiktoken_encoding() -> Any:
    """cl100k_base from the copy litellm ships (offline, as litellm itself reads it), without importing
    litellm: finding its folder on the import path runs none of its code."""
    spec = PathFinder.find_spec("litellm")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
        # what importing litellm sets too, so both read the same file
        os.environ["TIKTOKEN_CACHE_DIR"] = os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR") or str(bundled)
    import tiktoken

    return tiktoken.get_encoding(TIKTOKEN_ENCODING)


def tiktoken_prompt_tokens(messages: list[Message]) -> int:
    """The prompt tokens litellm's `token_counter` reports for a model it does not know, counted without
    litellm: tiktoken's cl100k_base count, close to, not equal to, the GGUF tokenizer's."""
    encoding = _tiktoken_encoding()

    def count(text: str) -> int:
        return sum(
            len(encoding.encode(text[start : start + TIKTOKEN_CHUNK_CHARS], disallowed_special=()))
            for start in range(0, len(text), TIKTOKEN_CHUNK_CHARS)
        )

    tokens = REPLY_PRIMER_TOKENS
    for message in messages:
        tokens += TOKENS_PER_MESSAGE
        for key, value in message.items():
            if isinstance(value, str):
                tokens += count(value) + (TOKENS_PER_NAME if key == "name" else 0)
            elif key == "content" and isinstance(value, list):
                texts = [str(part.get("text", "")) for part in value if part.get("type") == "text"]
                tokens += sum(count(text) for text in texts)
    return tokens


class LocalProvider(Provider):
    """``local/<packaged GGUF name or .gguf path>``: llama-cpp-python in this process, free, one call at a
    time, checked offline (the file or the packaged model, and llama-cpp-python installed)."""

    name: ClassVar[str] = PROVIDER
    in_process: ClassVar[bool] = True
    checked_offline: ClassVar[bool] = True

    @classmethod
    def resolve_model_file(cls, model: str, resolve: Callable[[str], str]) -> str:
        """Only ``local/<file>.gguf`` names a file (any other ``local/<name>`` is a packaged model): the
        result is ``local/`` + the resolved path, e.g. ``local//abs/m.gguf`` (the provider strips
        ``local/`` and opens what is left)."""
        file = model.removeprefix(LOCAL_PREFIX)
        return LOCAL_PREFIX + resolve(file) if file.endswith(".gguf") else model

    def check_ready(self, environment: Mapping[str, str] | None = None) -> LLMReadiness:
        check_local_model(self.model_name)
        return LLMReadiness(self.llm.model, PROVIDER)

    def open(self) -> None:
        self.check_ready()
        get_local_model(self.model_name)

    def json_mode(self) -> str:
        return "json_schema" if self.llm.json_mode == "auto" else self.llm.json_mode  # a llama.cpp grammar

    def response_format(self, mode: str, schema: type[BaseModel], schema_json: dict[str, Any]) -> Any | None:
        if mode == "json_schema":
            return {"type": "json_object", "schema": schema_json}  # llama-cpp's form
        return super().response_format(mode, schema, schema_json)

    def send(self, messages: list[Message], params: dict[str, Any]) -> ProviderReply:
        options = {k: v for k, v in params.items() if k not in ("model", "timeout", "api_base")}
        out = run_local_chat(self.model_name, messages, options)
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return ProviderReply(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            cost_usd=0.0,
        )

    def classify(self, error: Exception) -> ErrorKind:
        """A prompt too long, or llama.cpp failing on it, fails that request: a retry computes the same."""
        if isinstance(error, LLMConfigError):
            return "config"
        if isinstance(error, ValueError | RuntimeError):
            return "item"
        raise error

    def count_prompt_tokens(self, messages: list[Message]) -> int:
        return tiktoken_prompt_tokens(messages)

    def price_usd(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        return 0.0  # free, and known to be

    def context_window(self) -> int | None:
        return context_size()  # the value the model will be loaded with
