"""The local model's prompt evaluation in fixed blocks, on a stand-in for llama-cpp's Llama: what is
reused from the previous prompt always ends on a block boundary, so every block is evaluated as one batch
at the same positions whichever prompt ran before (the real model:
tests/integration/test_llm_local_integration.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ragbench.llm.local import PROMPT_BLOCK, LocalModel, _evaluate_in_blocks


class FakeLlama:
    """What `_evaluate_in_blocks` touches: the tokens in the KV cache and the evaluation it wraps."""

    def __init__(self) -> None:
        self.input_ids = np.zeros(4096, dtype=np.intc)
        self.n_tokens = 0
        self.calls: list[tuple[int, list[int]]] = []  # (position, tokens) per evaluation

    def eval(self, tokens: list[int]) -> None:
        self.calls.append((self.n_tokens, list(tokens)))
        self.input_ids[self.n_tokens : self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)


def model() -> tuple[LocalModel, FakeLlama]:
    llama = FakeLlama()
    loaded = LocalModel(path=Path("m.gguf"), llama=llama, lock=threading.Lock())
    llama.eval = _evaluate_in_blocks(loaded, FakeLlama.eval.__get__(llama))  # as get_local_model installs it
    return loaded, llama


def test_the_reused_prefix_is_cut_back_to_a_block_boundary_and_the_rest_evaluated_from_there():
    loaded, llama = model()
    first = list(range(1000, 1000 + 2 * PROMPT_BLOCK + 30))
    loaded.prompt_pending = True
    llama.eval(first)  # a fresh prompt: from position 0
    assert llama.calls[-1][0] == 0 and loaded.reused_tokens == 0
    llama.eval([7])  # a generated token is evaluated where it falls
    assert llama.calls[-1] == (len(first), [7])

    # llama-cpp found 2 blocks + 10 tokens in common with the next prompt and evaluates from there
    common = 2 * PROMPT_BLOCK + 10
    second = [*first[:common], *range(5000, 5020)]
    llama.n_tokens = common
    loaded.prompt_pending = True
    llama.eval(second[common:])
    position, tokens = llama.calls[-1]
    assert position == loaded.reused_tokens == 2 * PROMPT_BLOCK  # the partial block is evaluated again
    assert tokens == second[2 * PROMPT_BLOCK :]
    assert list(llama.input_ids[: llama.n_tokens]) == second and not loaded.prompt_pending


def test_a_prefix_shorter_than_a_block_is_not_reused():
    loaded, llama = model()
    prompt = list(range(PROMPT_BLOCK + 5))
    llama.input_ids[:10] = prompt[:10]
    llama.n_tokens = 10
    loaded.prompt_pending = True
    llama.eval(prompt[10:])
    assert llama.calls == [(0, prompt)] and loaded.reused_tokens == 0
