"""The seam between the scheduler and an engine: the Backend that prepares a sequence (as the
decode loop sees it: server/engine/generation.py) and computes its tokens (a model forward pass,
or a table look-up)."""
from __future__ import annotations

import abc
from typing import Any

from server.engine.generation import Sequence


class SequenceFailed(Exception):
    """In the list `Backend.step` returns, in place of a token: this sequence failed alone (its
    sampling, say) and ends with an error; the others of the batch carry on."""


class Backend(abc.ABC):
    """What differs between engines: how a sequence is prepared and how tokens are computed.
    Called from the decode loop thread only (or the event loop thread in blocking mode)."""

    def load(self) -> None:
        """Load weights etc. Runs once, off the event loop, before the first step."""

    def enter_thread(self) -> None:
        """Called on the decode loop thread before the first step (e.g. torch inference mode)."""

    @abc.abstractmethod
    def prefill(self, seq: Sequence) -> None:
        """Prepare `seq.state` from the prompt. May raise: the request then ends with 'error'."""

    def prefill_many(self, seqs: list[Sequence]) -> list[Exception | None]:
        """Prefill sequences admitted together; each one's error (it then ends alone) or None.
        A backend that can prefill them in one pass (a model) overrides this."""
        failures: list[Exception | None] = []
        for seq in seqs:
            try:
                self.prefill(seq)
                failures.append(None)
            except Exception as exc:  # noqa: BLE001 - one request's failure is its own
                failures.append(exc)
        return failures

    @abc.abstractmethod
    def step(self, seqs: list[Sequence]) -> list[int | SequenceFailed]:
        """Compute the next token of every sequence, together. Forced sequences must return
        `seq.next_forced_id`. A SequenceFailed in a sequence's place ends that one alone; an
        exception raised (the forward pass itself failed) ends every sequence of the batch."""

    def release(self, seq: Sequence) -> None:
        """Free what `prefill` allocated (the slot's KV cache)."""

    def describe(self) -> dict[str, Any]:
        return {}
