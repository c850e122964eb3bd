"""The seam between the scheduler and an engine: a sequence as the decode loop sees it, and the
Backend that prepares it and computes its tokens (a model forward pass, or a table look-up)."""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from server.engine.base import GenerationRequest

if TYPE_CHECKING:
    from server.engine.generation import ScheduledGeneration


class SequenceFailed(Exception):
    """In the list `Backend.step` returns, in place of a token: this sequence failed alone (its
    sampling, say) and ends with an error; the others of the batch carry on."""


@dataclass(eq=False)
class Sequence:
    """One admitted or queued request, as the decode loop sees it. Touched by the loop thread only,
    except `cancelled`, `cancel_reason` and `client_gone_at` (set from the event loop)."""

    id: int
    request: GenerationRequest
    generation: "ScheduledGeneration"
    # Set when the sequence gets a slot; pacing is relative to this moment.
    started_at: float = 0.0
    due: float = 0.0
    generated: int = 0
    cancelled: bool = False
    cancel_reason: str = ""
    client_gone_at: float | None = None
    finished: bool = False
    # Backend-private state (KV cache, position, RNG, ...).
    state: Any = None
    # The request's max_new_tokens, lowered by the backend when the model has fewer positions.
    max_new_tokens: int = -1

    def __post_init__(self) -> None:
        if self.max_new_tokens < 0:
            self.max_new_tokens = self.request.max_new_tokens

    def next_due(self, now: float) -> float:
        """When the token after the one just emitted is due (its pacing)."""
        pacing = self.request.pacing
        period = 1.0 / pacing.tokens_per_s if pacing.tokens_per_s else 0.0
        # Anchored to the schedule (no drift from step time), but never more than one period
        # behind now: an engine that fell behind resumes the rate instead of bursting.
        due = max(self.due + period, now - period) if period else now
        if pacing.pause_after_tokens is not None and self.generated == pacing.pause_after_tokens:
            due = max(due, now) + pacing.pause_s
        return due

    @property
    def next_forced_id(self) -> int | None:
        forced = self.request.forced_ids
        if forced is None:
            return None
        return forced[self.generated]


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
