"""Fine-tune a late-interaction (ColBERT) reranker on training pairs, on the CPU (or a GPU where there is
one), and write it in the colbertv2.0 layout the stored-encodings path and RAGatouille load.

It starts from the untrained stand-in (MiniLM's encoder, seeded projection) and trains every weight with
colbert-ai's own query and document encoders, so what it learns is what inference computes. The loss is
the cross-entropy of the positive among its mined negatives and every other question's chunks in the batch.
Validation reranks held-out sources' questions' dense candidates (MRR by source, as the eval set judges
relevance) every `validate_every` steps; training stops after `patience` checks without a gain, at
`max_minutes`, or after `epochs`, and the best checkpoint seen is the one kept.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel
from tqdm.auto import tqdm

from ragbench.inputs.chunking import ChunkSet
from ragbench.models.standin import write_colbert_checkpoint
from ragbench.training.pairs import TrainingPairs, ValidationQuestion

QUERY_MAXLEN = 32


class TrainingRecipe(BaseModel):
    """What shapes the weights (part of the checkpoint's identity)."""

    epochs: int
    batch_size: int
    negatives: int
    learning_rate: float
    doc_maxlen: int
    validate_every: int
    patience: int
    max_minutes: float
    seed: int


class TrainingLog(BaseModel):
    """How training went: what the checkpoint artifact records beside its weights."""

    steps: int
    best_step: int
    seconds: float
    stopped_because: str
    loss_curve: list[tuple[int, float]]  # (step, mean loss since the previous point)
    validation_curve: list[tuple[int, float]]  # (step, validation MRR)
    validation_mrr_before: float  # the untrained start's
    validation_mrr_first_stage: float  # the dense candidates' own order (no reranking)
    validation_questions: int
    device: str
    kept: str  # "best": the best-validated weights; "last": the last step's (none validated, or none better)

    @property
    def beat_the_start(self) -> bool | None:
        """Whether a validation beat the untrained start (None: nothing was validated)."""
        return None if self.validation_questions == 0 else self.best_step > 0


def _mrr(
    rankings: Sequence[Sequence[int]], questions: Sequence[ValidationQuestion], chunks: ChunkSet
) -> float:
    total = 0.0
    for ranking, question in zip(rankings, questions, strict=True):
        for rank, position in enumerate(ranking, start=1):
            if chunks.chunks[position].source == question.source:
                total += 1.0 / rank
                break
    return total / max(1, len(questions))


class _Model:
    """colbert-ai's ColBERT with its tokenizers, trainable: ``encode_queries``/``encode_docs`` keep grads."""

    def __init__(self, location: str, doc_maxlen: int, device: str) -> None:
        from colbert.infra import ColBERTConfig
        from colbert.modeling.checkpoint import Checkpoint

        config = ColBERTConfig(checkpoint=location, doc_maxlen=doc_maxlen, query_maxlen=QUERY_MAXLEN)
        with contextlib.redirect_stdout(io.StringIO()):
            self.checkpoint = Checkpoint(location, colbert_config=config, verbose=0)
        self.checkpoint.to(device)
        self.checkpoint.query_tokenizer.query_maxlen = QUERY_MAXLEN
        self.checkpoint.doc_tokenizer.doc_maxlen = doc_maxlen

    def encode_queries(self, texts: Sequence[str]):
        from colbert.modeling.colbert import ColBERT

        ids, mask = self.checkpoint.query_tokenizer.tensorize(list(texts))
        return ColBERT.query(self.checkpoint, ids, mask)

    def encode_docs(self, texts: Sequence[str]):
        from colbert.modeling.colbert import ColBERT

        ids, mask = self.checkpoint.doc_tokenizer.tensorize(list(texts))
        return ColBERT.doc(self.checkpoint, ids, mask, keep_dims="return_mask")


def _maxsim(queries, docs, doc_mask):
    """(questions, docs) scores: per query token the best document token, summed (padding never wins)."""
    import torch

    similarities = torch.einsum("qtd,nld->qntl", queries, docs)
    similarities = similarities.masked_fill(~doc_mask.squeeze(-1)[None, :, None, :], -1e4)
    return similarities.max(dim=-1).values.sum(dim=-1)


def _validate(model: _Model, pairs: TrainingPairs, chunks: ChunkSet, batch_size: int) -> float:
    import torch

    questions = pairs.validation
    if not questions:
        return float("nan")
    needed = sorted({p for q in questions for p in q.candidates})
    model.checkpoint.eval()
    with torch.no_grad():
        encoded: dict[int, Any] = {}
        for start in range(0, len(needed), batch_size):
            batch = needed[start : start + batch_size]
            docs, mask = model.encode_docs([chunks.chunks[p].text for p in batch])
            for row, position in enumerate(batch):
                encoded[position] = docs[row][mask[row].squeeze(-1)]
        rankings = []
        for start in range(0, len(questions), batch_size):
            batch_questions = questions[start : start + batch_size]
            encoded_questions = model.encode_queries([q.question for q in batch_questions])
            for row, question in enumerate(batch_questions):
                scores = [
                    float((encoded_questions[row] @ encoded[p].T).max(dim=-1).values.sum())
                    for p in question.candidates
                ]
                order = np.argsort(-np.asarray(scores), kind="stable")
                rankings.append([question.candidates[i] for i in order])
    model.checkpoint.train()
    return _mrr(rankings, questions, chunks)


def train_colbert(
    pairs: TrainingPairs,
    chunks: ChunkSet,
    *,
    start_location: str,
    dest: Path,
    recipe: TrainingRecipe,
    device: str = "cpu",
    progress: bool | None = None,
    on_validation: Callable[[int, float], None] | None = None,
) -> TrainingLog:
    """Train from the checkpoint at `start_location`; the best-validated weights are written to `dest`."""
    import torch

    if not pairs.training:
        raise ValueError("no training pairs: nothing to train on (see the pairs' dropped counts)")
    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    model = _Model(start_location, recipe.doc_maxlen, device)
    parameters = [p for p in model.checkpoint.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=recipe.learning_rate, weight_decay=0.01)
    steps_per_epoch = max(1, len(pairs.training) // recipe.batch_size)
    total_steps = steps_per_epoch * recipe.epochs
    warmup = max(1, total_steps // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total_steps - s) / (total_steps - warmup)))
    )
    started = time.perf_counter()
    first_stage = _mrr([q.candidates for q in pairs.validation], pairs.validation, chunks)
    before = best = _validate(model, pairs, chunks, recipe.batch_size * 4)
    best_state = {k: v.detach().clone() for k, v in model.checkpoint.model.state_dict().items()}
    best_step, checks_without_gain, step, stopped = 0, 0, 0, f"{recipe.epochs} epoch(s) done"
    losses: list[float] = []
    loss_curve: list[tuple[int, float]] = []
    validation_curve = [(0, round(before, 4))]
    model.checkpoint.train()
    bar = tqdm(
        total=total_steps,
        desc="train reranker",
        unit="step",
        disable=None if progress is None else not progress,
    )
    try:
        for _ in range(recipe.epochs):
            order = list(range(len(pairs.training)))
            rng.shuffle(order)
            for start in range(0, steps_per_epoch * recipe.batch_size, recipe.batch_size):
                batch = [pairs.training[i] for i in order[start : start + recipe.batch_size]]
                texts = [e.positive for e in batch] + [
                    chunks.chunks[n].text for e in batch for n in e.negatives[: recipe.negatives]
                ]
                queries = model.encode_queries([e.question for e in batch])
                docs, mask = model.encode_docs(texts)
                scores = _maxsim(queries, docs, mask)
                loss = torch.nn.functional.cross_entropy(
                    scores, torch.arange(len(batch), device=scores.device)
                )
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, 2.0)
                optimizer.step()
                scheduler.step()
                step += 1
                losses.append(float(loss.detach()))
                bar.update(1)
                if step % recipe.validate_every == 0:
                    loss_curve.append((step, round(float(np.mean(losses)), 4)))
                    losses = []
                    mrr = _validate(model, pairs, chunks, recipe.batch_size * 4)
                    validation_curve.append((step, round(mrr, 4)))
                    if on_validation is not None:
                        on_validation(step, mrr)
                    if mrr > best:
                        best, best_step, checks_without_gain = mrr, step, 0
                        best_state = {
                            k: v.detach().clone() for k, v in model.checkpoint.model.state_dict().items()
                        }
                    else:
                        checks_without_gain += 1
                    if checks_without_gain >= recipe.patience:
                        stopped = f"no validation gain in {recipe.patience} check(s)"
                        raise StopIteration
                if time.perf_counter() - started > recipe.max_minutes * 60:
                    stopped = f"time limit of {recipe.max_minutes:g} min"
                    raise StopIteration
    except StopIteration:
        pass
    finally:
        bar.close()
    if losses:
        loss_curve.append((step, round(float(np.mean(losses)), 4)))
    kept = "best" if best_step > 0 else "last"
    last_state = model.checkpoint.model.state_dict()
    _save(best_state if kept == "best" else last_state, start_location, dest, recipe.doc_maxlen)
    return TrainingLog(
        steps=step,
        best_step=best_step,
        seconds=round(time.perf_counter() - started, 1),
        stopped_because=stopped,
        loss_curve=loss_curve,
        validation_curve=validation_curve,
        validation_mrr_before=round(before, 4),
        validation_mrr_first_stage=round(first_stage, 4),
        validation_questions=len(pairs.validation),
        device=device,
        kept=kept,
    )


def _save(state: dict, start_location: str, dest: Path, doc_maxlen: int) -> None:
    start = Path(start_location)
    tensors = {
        key: np.ascontiguousarray(value.detach().cpu().float().numpy())
        for key, value in state.items()
        if (key.startswith("bert.") or key == "linear.weight") and not key.endswith("position_ids")
    }
    config = json.loads((start / "config.json").read_text(encoding="utf-8"))
    dim = int(tensors["linear.weight"].shape[0])
    write_colbert_checkpoint(
        dest, config=config, tensors=tensors, tokenizer_dir=start, dim=dim, doc_maxlen=doc_maxlen
    )
