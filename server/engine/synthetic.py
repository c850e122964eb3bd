"""The model-free engine (`--engine synthetic`): the same tokens, pacing and slots, no forward pass.

For load tests of the streaming path (1,000 streams): a token costs a list index. With a script it
emits exactly the forced ids (the same ids the transformers engine teacher-forces); without one, a
deterministic stream that cycles through the tokenized corpus, starting at an offset derived from
the request's seed (0 without one), so two runs give the same text.
"""
from __future__ import annotations

from typing import Any

from server.engine.backend import Backend
from server.engine.generation import Sequence
from server.locations import corpus_files


def corpus_token_ids(tokenizer: Any) -> list[int]:
    """The shipped corpus, tokenized: readable text for unscripted synthetic streams."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in corpus_files())
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    if not ids:  # a tokenizer that encodes nothing: fall back to any non-special ids
        ids = [i for i in range(min(len(tokenizer), 256)) if i not in set(tokenizer.all_special_ids)]
    return ids or [0]


class SyntheticBackend(Backend):
    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._stream: list[int] = []

    def load(self) -> None:
        self._stream = corpus_token_ids(self._tokenizer)

    def prefill(self, seq: Sequence) -> None:
        seed = seq.request.sampling.seed or 0
        seq.state = (seed * 7919) % len(self._stream)  # where this sequence starts in the corpus

    def step(self, seqs: list[Sequence]) -> list[int]:
        stream = self._stream
        n = len(stream)
        out: list[int] = []
        for seq in seqs:
            forced = seq.request.forced_ids
            if forced is not None:
                out.append(forced[seq.generated])
            else:
                out.append(stream[(seq.state + seq.generated) % n])
        return out

    def describe(self) -> dict[str, Any]:
        return {"device": "none", "corpus_tokens": len(self._stream)}
