"""Build the offline default model: a byte-level BPE tokenizer and a small random Llama.

    python -m server.tools.model_builder --out .models/tiny [--size tiny|gpu] [--seed 0]
    python -m server.tools.model_builder --tokenizer-only --out server/tokenizer   # what ships (no torch)

The tokenizer is trained with `tokenizers` on the corpus this package ships (server/corpus/*.txt:
English, Japanese, emoji with skin tones and ZWJ sequences), wrapped as a transformers fast
tokenizer with a ChatML-like chat template, and saved with `save_pretrained` next to the model, so
`AutoTokenizer` / `AutoModelForCausalLM.from_pretrained(out)` load it like any hub model, offline.

Why random weights are enough: the lab teaches how tokens travel, not what they say. Exact text
comes from teacher forcing (the engine masks every logit but the next scripted id), and each token
still costs a real forward pass, so timing and batching are those of a real model.

Reproducible: the same versions of torch/transformers/tokenizers give byte-identical files (the
corpus is read in sorted order, training is single-threaded, weights come from a seeded
generator). Atomic: the model is built in a temporary sibling folder and renamed into place, so an
interrupted build never leaves a folder with a config.json (the Makefile's target) but no weights.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Set before tokenizers/transformers are imported: parallel BPE training and hub look-ups are
# the two sources of nondeterminism and stalls we do not want in a build.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from server import extras  # noqa: E402
from server.locations import CORPUS_DIR, SHIPPED_TOKENIZER, corpus_files, default_model_dir  # noqa: E402

# Special tokens get the first ids, in this order, so their ids never move between builds.
ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD = "<|pad|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END, PAD]

# ChatML-like. Content may be a string or a list of OpenAI content parts (only text is kept).
CHAT_TEMPLATE = (
    # No whitespace control (`{%-`): it would eat the newlines that are part of the format.
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class ModelSize:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    dtype: str  # what the weights are saved as


SIZES: dict[str, ModelSize] = {
    # ~1.2M parameters, ~5 MB: ~1.5 ms per decode step on one CPU thread.
    "tiny": ModelSize(128, 512, 4, 4, 2, 2048, "float32"),
    # ~150M parameters for CUDA runs (saved as bfloat16: ~300 MB); too slow to be useful on CPU.
    "gpu": ModelSize(1024, 2816, 12, 16, 8, 4096, "bfloat16"),
}

VOCAB_SIZE = 1024


def build_tokenizer(corpus_dir: Path = CORPUS_DIR, vocab_size: int = VOCAB_SIZE):
    """Train the byte-level BPE and wrap it as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        # Every byte is in the vocabulary, so any text (even text the corpus never saw) encodes.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = [p.read_text(encoding="utf-8") for p in corpus_files(corpus_dir)]
    # One line per training sequence; order is fixed by the sorted file list.
    lines = [line for text in texts for line in text.splitlines() if line.strip()]
    tok.train_from_iterator(lines, trainer=trainer, length=len(lines))

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=PAD,
        bos_token=None,
        unk_token=None,
        additional_special_tokens=[ENDOFTEXT, IM_START],
        model_max_length=SIZES["tiny"].max_position_embeddings,
        clean_up_tokenization_spaces=False,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_model(tokenizer, size: str, seed: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    spec = SIZES[size]
    eos_ids = [tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(ENDOFTEXT)]
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        bos_token_id=tokenizer.convert_tokens_to_ids(IM_START),
        eos_token_id=eos_ids,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    # A private generator state: seeding the global RNG is what LlamaForCausalLM's init reads.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model = model.to(getattr(torch, spec.dtype))
    model.eval()
    model.generation_config.eos_token_id = eos_ids
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = config.bos_token_id
    return model


def write_tokenizer(out: Path, corpus_dir: Path = CORPUS_DIR) -> Path:
    """The tokenizer alone, with the model's eos ids (no torch): server/tokenizer/, which the
    synthetic engine reads when the model is not built (tests/server/test_fast_tokenizer.py keeps it equal
    to what `build` writes)."""
    tokenizer = build_tokenizer(corpus_dir)
    out = Path(out)
    tokenizer.save_pretrained(out)
    eos = [tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(ENDOFTEXT)]
    (out / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}) + "\n",
                                                 encoding="utf-8")
    return out


def build(out: Path, size: str = "tiny", seed: int = 0, corpus_dir: Path = CORPUS_DIR) -> Path:
    """Build into a temporary sibling folder, then swap it into `out` (never half-written)."""
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    # One thread: faster for a model this small, and no thread-count-dependent reductions.
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.build-", dir=out.parent))
    try:
        tokenizer = build_tokenizer(corpus_dir)
        model = build_model(tokenizer, size, seed)
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp, safe_serialization=True)
        # mkdtemp makes the folder 0700 and safetensors writes 0600: make them readable like
        # any checkout (a container may run as another user with the folder mounted).
        os.chmod(tmp, 0o755)
        for f in tmp.iterdir():
            os.chmod(f, 0o644)
        old: Path | None = None
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.rename(out, old)
        os.rename(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def prepare(engine: str, model: str, say_as: str = "server") -> str | None:
    """What a server of this engine needs before it starts: the transformers engine's extra, and
    the default model, built on first use (into the user's cache when installed). Returns the
    one-line reason it cannot start, or None."""
    if engine != "transformers":
        return None
    try:
        extras.require("model", "the transformers engine (the default)")
    except extras.MissingExtra as exc:
        return str(exc)
    from server.config import DEFAULT_MODEL

    out = Path(model)
    if model == DEFAULT_MODEL and not (out / "config.json").is_file():
        print(f"{say_as}: the default model is not built yet; building it into {out} "
              "(first use only, a few seconds)", file=sys.stderr, flush=True)
        build(out)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.tools.model_builder", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="the folder (default: where the server looks, "
                             f"{default_model_dir()} for tiny)")
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer-only", action="store_true",
                        help="only the tokenizer and the eos ids (what server/tokenizer/ ships)")
    args = parser.parse_args(argv)
    if args.tokenizer_only:
        print(f"wrote the tokenizer to {write_tokenizer(args.out or SHIPPED_TOKENIZER)}", file=sys.stderr)
        return 0
    try:
        extras.require("model", "building the model")
    except extras.MissingExtra as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out = args.out or default_model_dir(args.size)
    t0 = time.perf_counter()
    out = build(args.out, args.size, args.seed)
    print(f"built {args.size} model in {out} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
