"""Engines: `create_engine(config, tokenizer)` builds the one `python -m server` asked for.

    tokenizer = load_tokenizer(config.model)
    engine = create_engine(config, tokenizer)
    await engine.start()
    gen = engine.submit(GenerationRequest(prompt_ids, max_new_tokens=64,
                                          eos_token_ids=eos_token_ids(tokenizer, config.model)))
    async for event in gen: ...          # TokenEvent(token_id, index)
    gen.finish_reason                    # "stop" | "length" | "cancelled" | "error"

torch is imported only by the transformers engine, so the synthetic engine starts fast.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from server.engine.base import (
    Engine,
    EngineConfig,
    EngineStopped,
    FinishReason,
    Generation,
    GenerationRequest,
    Pacing,
    QueueFull,
    SamplingParams,
    TokenEvent,
)

__all__ = [
    "Engine", "EngineConfig", "EngineStopped", "FinishReason", "Generation", "GenerationRequest",
    "Pacing", "QueueFull", "SamplingParams", "TokenEvent",
    "create_engine", "load_tokenizer", "eos_token_ids",
]


def load_tokenizer(model: str, engine: str = "transformers") -> Any:
    """The model's tokenizer (a local folder, or a hub id already in the local cache).

    A folder of transformers' generic tokenizer class is read with the `tokenizers` library alone
    (server/text/fast_tokenizer.py: the same ids, text and chat template, no transformers import, so
    the synthetic engine needs no [model] extra and the transformers engine starts ~1 s sooner);
    any other tokenizer is transformers' AutoTokenizer. The synthetic engine with the default
    model not built yet (installed, the transformers engine builds it on first use) reads the tiny
    model's tokenizer this package ships (server/tokenizer/). Raises MissingExtra when
    transformers is what it takes and is not installed.
    """
    from server import extras
    from server.config import DEFAULT_MODEL
    from server.locations import SHIPPED_TOKENIZER
    from server.text.fast_tokenizer import FastTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    source = model
    if engine == "synthetic":
        if model == DEFAULT_MODEL and not (Path(model) / "tokenizer.json").is_file():
            source = str(SHIPPED_TOKENIZER)
    else:
        extras.require("model", "the transformers engine")
    try:
        return FastTokenizer.from_folder(source)
    except ValueError as exc:
        if not extras.installed("transformers"):
            raise extras.MissingExtra(f"{exc} (not installed): pip install 'streamlab[model]'") from None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source)


def eos_token_ids(tokenizer: Any, model: str | None = None) -> frozenset[int]:
    """Ids that end generation: the tokenizer's eos plus the model's generation_config eos list
    (the tiny model stops at both <|im_end|> and <|endoftext|>)."""
    ids: set[int] = set()
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    if model is not None:
        folder = Path(model)
        if not folder.is_dir():  # not built: the synthetic engine reads server/tokenizer/ instead
            folder = Path(getattr(tokenizer, "name_or_path", None) or model)
        for name in ("generation_config.json", "config.json"):
            path = folder / name
            if path.is_file():
                value = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
                if isinstance(value, int):
                    ids.add(value)
                elif isinstance(value, list):
                    ids.update(int(v) for v in value)
    return frozenset(ids)


def create_engine(config: EngineConfig, tokenizer: Any) -> Engine:
    from server.engine.scheduler import Scheduler

    if config.kind == "synthetic":
        from server.engine.synthetic import SyntheticBackend

        backend: Any = SyntheticBackend(tokenizer)
    elif config.kind == "transformers":
        from server.engine.transformers_engine import TransformersBackend

        backend = TransformersBackend(config.model, config.device, config.torch_threads)
    else:
        raise ValueError(f"unknown engine {config.kind!r}: expected transformers or synthetic")
    return Scheduler(config.kind, backend, slots=config.slots, max_queue=config.max_queue,
                     blocking_loop=config.blocking_loop, serial_prefill=config.serial_prefill)
