"""The transformers engine: a causal LM decoded in batches by our own loop (server.engine.scheduler).

Decision: our own batched decode loop, not transformers' continuous batching
---------------------------------------------------------------------------
transformers 5.24 ships `model.init_continuous_batching()` (a ContinuousBatchingManager with paged
attention and its own generation thread). Measured on the tiny model (hidden 128, 4 layers), CPU,
one torch thread, 2 shared cores (`python -m server.tools.engine_bench --compare-cb`):

    200-token prompt, 128 new tokens     ours (this module)        transformers CB
    batch 1: tokens/s, step               955 tok/s, 0.91 ms        835 tok/s, 1.20 ms
    batch 8: tokens/s, step               3,940 tok/s, 1.5-2.0 ms   1,960 tok/s, 4.08 ms
    first request after start             9 ms TTFT                 8.8-20 s (warm-up)
    cancel -> slot free                   1.2 ms (< one step)       no signal that it happened
    client reads nothing for 200 ms       0 tokens computed ahead   178 tokens computed ahead
    teacher-forced exact text             yes (per request)         needs a custom processor

It runs on CPU, and its throughput would do, but it cannot do what this lab needs:
* pacing in the loop: its thread decodes every request as fast as it can and queues the outputs;
  a token cannot be held back until it is due, so a paced stream would be computed ahead into an
  unbounded buffer (exactly what the lab must not do);
* per-request teacher forcing and per-request seeds: logits processors are built once per
  manager (add_request's kwargs only parametrize them), so forcing a script would take a custom
  processor wired into its internals, and sampling has no per-request torch.Generator;
* slot accounting and cancellation latency are internal to the manager (no hook to free the slot
  within one step and to know that it happened, which the disconnect lab asserts on /metrics).

Our loop: each slot keeps its own KV cache (per-layer key/value tensors of its valid length).
Every step, the sequences that are due are stacked into one left-padded batch (a DynamicCache
plus a 2D attention mask and per-row position ids, the standard left-padding recipe that every
transformers model supports), decoded with one forward pass, and the batch is kept as is for the
next step while the set of due sequences stays the same (the common case: unpaced streams step
together every step), so the stacking copy is paid only when a sequence joins, leaves, or pacing
splits the batch. Prefill runs at admission over the prompt minus its last token; that last token
is fed by the first decode step, so every emitted token is computed by a step, when it is due.
Sequences admitted in the same loop iteration (a burst of arrivals) prefill together: one
left-padded pass per group of similar lengths (`prefill_many`), not one pass per request.
"""
from __future__ import annotations

import inspect
import logging
import os
import secrets
from dataclasses import dataclass, field
from typing import Any

from server.engine.backend import Backend, SequenceFailed
from server.engine.generation import Sequence

log = logging.getLogger(__name__)

# Padded prompt tokens per batched prefill pass: prompts of similar length go together up to this
# (64 arrivals of a short chat prompt are one pass; long prompts are cut into several).
PREFILL_BATCH_TOKENS = 8192


def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda: torch sees no CUDA device")
    return device


@dataclass(eq=False)
class _SlotState:
    # Per-layer (key, value), each [1, kv_heads, length, head_dim], valid when not in a batch.
    kv: list[tuple[Any, Any]] | None
    length: int  # tokens in the KV cache = the position of the next input token
    next_input: int  # the token fed by the next step (the prompt's last, then each output)
    generator: Any = None  # torch.Generator for sampling, seeded per request
    batch_row: int = -1  # row in the current batch, -1 when detached


@dataclass(eq=False)
class _Batch:
    seqs: list[Sequence]
    cache: Any  # DynamicCache, left-padded to `width` columns
    mask: Any  # [B, width] long: 1 for real tokens
    width: int
    ids: tuple[int, ...] = field(default=())


class TransformersBackend(Backend):
    def __init__(self, model: str, device: str = "auto", torch_threads: int = 1) -> None:
        self.model_path = model
        self.requested_device = device
        self.torch_threads = torch_threads
        self.device = "cpu"
        self.model: Any = None
        self.dtype: Any = None
        self.max_positions = 1 << 30
        self._batch: _Batch | None = None
        self._cache_kw = "past_key_values"
        self._vocab = 0

    # ---- loading ----------------------------------------------------------------------------

    def load(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.device = pick_device(self.requested_device)
        if self.device == "cpu":
            # One thread: two gave large latency spikes on 2 shared cores (docs/environment.md).
            torch.set_num_threads(self.torch_threads)
            self.dtype = torch.float32
        else:
            self.dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        try:
            model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=self.dtype)
        except TypeError:  # transformers before 4.56 spells it torch_dtype
            model = AutoModelForCausalLM.from_pretrained(self.model_path, torch_dtype=self.dtype)
        model.to(self.device)
        model.eval()
        self.model = model
        # transformers 5.24 renamed forward's `past_key_values` to `cache` (the old name warns and
        # goes away in 5.40); older 5.x only know the old name.
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        cfg = model.config
        self.max_positions = int(getattr(cfg, "max_position_embeddings", 1 << 30) or (1 << 30))
        self._vocab = int(cfg.vocab_size)
        # Warm-up: the first forward pass pays one-off costs (kernels, allocator) that would
        # otherwise land on the first request's TTFT.
        with torch.inference_mode():
            model(input_ids=torch.tensor([[0, 1]], device=self.device), use_cache=True)

    def enter_thread(self) -> None:
        import torch

        # Grad mode is thread-local: set it on the thread that runs the steps.
        torch.set_grad_enabled(False)
        self._inference = torch.inference_mode()
        self._inference.__enter__()

    def describe(self) -> dict[str, Any]:
        return {"device": self.device, "dtype": str(self.dtype).replace("torch.", ""),
                "model": self.model_path}

    # ---- prefill ----------------------------------------------------------------------------

    def prefill(self, seq: Sequence) -> None:
        failure = self.prefill_many([seq])[0]
        if failure is not None:
            raise failure

    def prefill_many(self, seqs: list[Sequence]) -> list[Exception | None]:
        """Prefill every sequence admitted together: prompts of similar length share one
        left-padded forward pass (the decode step's recipe: a 2D mask and per-row positions),
        so a burst of arrivals costs a few passes instead of one per request."""
        import torch

        failures: list[Exception | None] = [None] * len(seqs)
        prompts: dict[int, list[int]] = {}
        for i, seq in enumerate(seqs):
            try:
                prompts[i] = self._checked_prompt(seq)
            except ValueError as exc:
                failures[i] = exc
        for i, prompt in prompts.items():
            seed = seqs[i].request.sampling.seed
            gen = torch.Generator(device=self.device)
            gen.manual_seed(seed if seed is not None else secrets.randbits(63))
            seqs[i].state = _SlotState(kv=None, length=len(prompt) - 1, next_input=prompt[-1],
                                       generator=gen)
            # Each output token needs a position: stop with "length" at the end of the context.
            seqs[i].max_new_tokens = min(seqs[i].max_new_tokens, self.max_positions - len(prompt) + 1)
        # Shortest first, cut where the padding would pass the batch's budget.
        order = sorted((i for i in prompts if len(prompts[i]) > 1), key=lambda i: len(prompts[i]))
        for i in prompts:
            if len(prompts[i]) <= 1:
                seqs[i].state.kv = self._empty_kv()
        group: list[int] = []
        for i in order:
            width = len(prompts[i]) - 1
            if group and (len(group) + 1) * width > PREFILL_BATCH_TOKENS:
                self._prefill_group(seqs, prompts, group, failures)
                group = []
            group.append(i)
        if group:
            self._prefill_group(seqs, prompts, group, failures)
        return failures

    def _checked_prompt(self, seq: Sequence) -> list[int]:
        prompt = [int(t) for t in seq.request.prompt_ids] or [0]
        if any(t < 0 or t >= self._vocab for t in prompt):
            raise ValueError(f"prompt token id out of range for a vocabulary of {self._vocab}")
        if len(prompt) >= self.max_positions:
            raise ValueError(f"prompt of {len(prompt)} tokens exceeds the model's "
                             f"{self.max_positions} positions")
        return prompt

    def _prefill_group(self, seqs: list[Sequence], prompts: dict[int, list[int]],
                       group: list[int], failures: list[Exception | None]) -> None:
        """One forward pass over the group's prompts (all but their last token), left-padded;
        each sequence keeps a view of its own columns of the cache."""
        import torch
        from transformers import DynamicCache

        dev = self.device
        width = max(len(prompts[i]) - 1 for i in group)
        ids = torch.zeros(len(group), width, dtype=torch.long, device=dev)
        mask = torch.zeros(len(group), width, dtype=torch.long, device=dev)
        for row, i in enumerate(group):
            body = prompts[i][:-1]
            ids[row, width - len(body):] = torch.tensor(body, device=dev)
            mask[row, width - len(body):] = 1
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        cache = DynamicCache()
        try:
            with torch.inference_mode():
                self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                           use_cache=True, logits_to_keep=1, **{self._cache_kw: cache})
        except Exception as exc:  # noqa: BLE001 - the group's pass failed: its requests end
            log.exception("batched prefill of %d prompts failed", len(group))
            for i in group:
                failures[i] = exc
            return
        layers = _cache_tensors(cache)
        for row, i in enumerate(group):
            start = width - (len(prompts[i]) - 1)
            seqs[i].state.kv = [(k[row:row + 1, :, start:], v[row:row + 1, :, start:])
                                for k, v in layers]

    def _empty_kv(self) -> list[tuple[Any, Any]]:
        import torch

        cfg = self.model.config
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        z = torch.zeros(1, heads, 0, head_dim, dtype=self.dtype, device=self.device)
        return [(z, z) for _ in range(cfg.num_hidden_layers)]

    # ---- decode -----------------------------------------------------------------------------

    def step(self, seqs: list[Sequence]) -> list[int | SequenceFailed]:
        import torch

        batch = self._batch
        if batch is None or batch.ids != tuple(s.id for s in seqs):
            batch = self._rebatch(seqs)
        states: list[_SlotState] = [s.state for s in seqs]
        dev = self.device
        input_ids = torch.tensor([[st.next_input] for st in states], device=dev)
        positions = torch.tensor([[st.length] for st in states], device=dev)
        mask = torch.cat([batch.mask, torch.ones(len(seqs), 1, dtype=batch.mask.dtype,
                                                 device=dev)], dim=1)
        with torch.inference_mode():
            out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                             use_cache=True, logits_to_keep=1, **{self._cache_kw: batch.cache})
        batch.mask = mask
        batch.width += 1
        logits = out.logits[:, -1, :]
        tokens = self._choose(seqs, logits)
        for st, tok in zip(states, tokens):
            st.length += 1
            if isinstance(tok, int):
                st.next_input = tok
        return tokens

    def _choose(self, seqs: list[Sequence], logits: Any) -> list[int | SequenceFailed]:
        """Teacher forcing or sampling, per row; a row that cannot be sampled fails alone."""
        import torch

        tokens: list[int | SequenceFailed] = []
        greedy_rows: list[int] = []
        for row, seq in enumerate(seqs):
            forced = seq.next_forced_id
            if forced is not None:
                # Masking every logit but `forced` makes argmax and sampling return `forced`:
                # the forward pass is real, the choice is fixed, so skip the no-op softmax.
                tokens.append(forced)
                continue
            sp = seq.request.sampling
            if sp.temperature <= 1e-5:
                greedy_rows.append(row)
                tokens.append(-1)
                continue
            try:
                tokens.append(self._sample(logits[row], sp, seq.state.generator))
            except Exception as exc:  # e.g. non-finite logits: this sequence alone fails
                tokens.append(SequenceFailed(f"sampling failed: {exc}"))
        if greedy_rows:
            best = torch.argmax(logits[greedy_rows], dim=-1).tolist()
            for row, tok in zip(greedy_rows, best):
                tokens[row] = int(tok)
        return tokens

    @staticmethod
    def _sample(row_logits: Any, sp: Any, generator: Any) -> int:
        import torch

        probs = torch.softmax(row_logits.float() / sp.temperature, dim=-1)
        if sp.top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            cum = torch.cumsum(sorted_p, dim=-1)
            # Keep the smallest prefix whose mass reaches top_p, and always the most likely
            # token: a top_p that float32 rounds to 0 (1e-300) would otherwise drop them all.
            drop = (cum - sorted_p) >= sp.top_p
            drop[0] = False
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            pick = torch.multinomial(sorted_p, 1, generator=generator)
            return int(order[pick])
        return int(torch.multinomial(probs, 1, generator=generator))

    def _rebatch(self, seqs: list[Sequence]) -> _Batch:
        """Stack the due sequences' KV caches into one left-padded batch."""
        import torch
        from transformers import DynamicCache

        self._detach()
        states: list[_SlotState] = [s.state for s in seqs]
        width = max(st.length for st in states)
        dev = self.device
        mask = torch.zeros(len(seqs), width, dtype=torch.long, device=dev)
        for row, st in enumerate(states):
            if st.length:
                mask[row, width - st.length:] = 1
        cache = DynamicCache()
        n_layers = len(states[0].kv or [])
        for layer in range(n_layers):
            k0, v0 = states[0].kv[layer]  # type: ignore[index]
            shape = (len(seqs), k0.shape[1], width, k0.shape[3])
            keys = torch.zeros(shape, dtype=k0.dtype, device=dev)
            values = torch.zeros((len(seqs), v0.shape[1], width, v0.shape[3]), dtype=v0.dtype,
                                 device=dev)
            for row, st in enumerate(states):
                if st.length:
                    k, v = st.kv[layer]  # type: ignore[index]
                    keys[row, :, width - st.length:] = k[0]
                    values[row, :, width - st.length:] = v[0]
            cache.update(keys, values, layer)
        for row, st in enumerate(states):
            st.kv = None  # the batch owns the KV now
            st.batch_row = row
        batch = _Batch(seqs=list(seqs), cache=cache, mask=mask, width=width,
                       ids=tuple(s.id for s in seqs))
        self._batch = batch
        return batch

    def _detach(self) -> None:
        """Give each sequence of the current batch its own KV again (views, no copy)."""
        batch = self._batch
        if batch is None:
            return
        self._batch = None
        layers = _cache_tensors(batch.cache)
        for seq in batch.seqs:
            st: _SlotState | None = seq.state
            if st is None or st.batch_row < 0:
                continue
            row, start = st.batch_row, batch.width - st.length
            st.kv = [(k[row:row + 1, :, start:], v[row:row + 1, :, start:]) for k, v in layers]
            st.batch_row = -1

    def release(self, seq: Sequence) -> None:
        batch = self._batch
        if batch is not None and any(s is seq for s in batch.seqs):
            self._detach()
        seq.state = None


def _cache_tensors(cache: Any) -> list[tuple[Any, Any]]:
    """Per-layer (keys, values) of a DynamicCache, across transformers versions."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    return [(k, v) for k, v in zip(cache.key_cache, cache.value_cache)]  # transformers < 4.56
