"""The tokenizer read with `tokenizers` alone (server/text/fast_tokenizer.py): the ids, text and
template of transformers' own.

The server reads the lab's model (and server/tokenizer/, for the synthetic engine of a base
install) with it; every test below that compares with transformers is skipped without it, the
rest run everywhere.
"""
from __future__ import annotations

import filecmp
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.locations import SHIPPED_TOKENIZER, corpus_files
from server.text.detokenizer import Vocabulary
from server.text.fast_tokenizer import FastTokenizer
from server.tools import model_builder

# Text the corpus never saw, split across tokens: CJK extension B, skin tones, ZWJ, Greek, digits
# outside ASCII, whitespace runs and the separators Python's \s takes but Unicode's does not.
HARD_TEXTS = [
    "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る — Ωμέγα 👩🏽‍🚒 ∮ ½ \t\n end",
    "it's we'll I'd they're 'S   three  spaces\n\n\n  and\u00a0nbsp\u3000wide",
    "١٢٣ ²³ Ⅻ 5½ e\u0301 combining a\x1cb\x1f c",
    "<|im_start|>user\nhi<|im_end|><|im_end|>x<|pad|><|endoftext|><|im_start",
    "", " ", "   leading", "trailing   ",
]
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "hi 🦩"}, {"type": "image"}]}]


@pytest.fixture(scope="module")
def bpe() -> FastTokenizer:
    return FastTokenizer.from_folder(SHIPPED_TOKENIZER)


@pytest.fixture(scope="module")
def reference() -> Any:
    """transformers' tokenizer of the same folder (skipped where transformers is not installed)."""
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(SHIPPED_TOKENIZER))


def corpus() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in corpus_files())


def test_text_round_trips_and_special_tokens_are_single_ids(bpe: FastTokenizer) -> None:
    for text in HARD_TEXTS[:3]:
        assert bpe.decode(bpe.encode(text)) == text
    ids = bpe.encode("<|im_start|>user\nhi<|im_end|>")
    assert ids[0] == bpe.convert_tokens_to_ids(model_builder.IM_START) and ids[-1] == bpe.eos_token_id
    assert bpe.decode(ids, skip_special_tokens=True) == "user\nhi"
    assert len(bpe) == model_builder.VOCAB_SIZE and max(bpe.encode(corpus())) < len(bpe)
    # Merges apply: the corpus takes far fewer tokens than bytes.
    assert len(bpe.encode(corpus())) < len(corpus().encode()) / 2


def test_chat_template_is_chatml(bpe: FastTokenizer) -> None:
    text = bpe.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n"
                    "<|im_start|>user\nhi 🦩<|im_end|>\n<|im_start|>assistant\n")


def test_the_detokenizer_gets_its_byte_table(bpe: FastTokenizer) -> None:
    vocabulary = Vocabulary.from_tokenizer(bpe)
    assert vocabulary.byte_level
    detokenizer = vocabulary.detokenizer()
    ids = bpe.encode(HARD_TEXTS[0])
    assert "".join(detokenizer.push(i) for i in ids) + detokenizer.flush() == HARD_TEXTS[0]


def test_a_model_specific_tokenizer_class_is_left_to_transformers(tmp_path: Path) -> None:
    config = json.loads((SHIPPED_TOKENIZER / "tokenizer_config.json").read_text(encoding="utf-8"))
    (tmp_path / "tokenizer.json").write_bytes((SHIPPED_TOKENIZER / "tokenizer.json").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({**config, "tokenizer_class": "LlamaTokenizer"}), encoding="utf-8")
    with pytest.raises(ValueError, match="LlamaTokenizer tokenizer, or no tokenizer.json: reading it needs transformers"):
        FastTokenizer.from_folder(tmp_path)


@pytest.mark.parametrize("text", [corpus(), *HARD_TEXTS], ids=["corpus", *map(str, range(len(HARD_TEXTS)))])
def test_same_ids_and_text_as_transformers(bpe: FastTokenizer, reference: Any, text: str) -> None:
    ids = reference.encode(text, add_special_tokens=False)
    assert bpe.encode(text) == ids
    for skip in (True, False):
        assert bpe.decode(ids, skip_special_tokens=skip) == reference.decode(
            ids, skip_special_tokens=skip, clean_up_tokenization_spaces=False)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
       | st.lists(st.sampled_from(["a", "B", " ", "  ", "\n", "\t", "'s", "'ll", "1", "²", "é",
                                   "\u0301", "🦩", "𠮷", "\u3000", "<|im_end|>", "<|im_", ".", "!"]),
                  max_size=20).map("".join))
def test_random_text_gets_the_same_ids(bpe: FastTokenizer, reference: Any, text: str) -> None:
    assert bpe.encode(text) == reference.encode(text, add_special_tokens=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, model_builder.VOCAB_SIZE - 1), max_size=12))
def test_random_ids_decode_alike(bpe: FastTokenizer, reference: Any, ids: list[int]) -> None:
    # Random ids are invalid UTF-8 as often as not: both replace it the same way.
    assert bpe.decode(ids, skip_special_tokens=True) == reference.decode(
        ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)


def test_same_vocabulary_and_template_as_transformers(bpe: FastTokenizer, reference: Any) -> None:
    size = len(reference)
    assert len(bpe) == size
    assert bpe.convert_ids_to_tokens(list(range(size))) == reference.convert_ids_to_tokens(list(range(size)))
    assert sorted(bpe.all_special_ids) == sorted(reference.all_special_ids)
    assert (bpe.eos_token_id, bpe.pad_token_id, bpe.model_max_length) == (
        reference.eos_token_id, reference.pad_token_id, reference.model_max_length)
    for generation in (True, False):
        assert bpe.apply_chat_template(MESSAGES, add_generation_prompt=generation, tokenize=False) == \
            reference.apply_chat_template(MESSAGES, add_generation_prompt=generation, tokenize=False)
    assert Vocabulary.from_tokenizer(bpe).byte_table == Vocabulary.from_tokenizer(reference).byte_table


def test_the_shipped_tokenizer_is_the_one_the_builder_makes(tmp_path: Path) -> None:
    """server/tokenizer/ is what `python -m server.tools.model_builder --tokenizer-only` writes (and the
    tiny model's own): after a change to the corpus or the builder, run that to refresh it."""
    pytest.importorskip("tokenizers")
    pytest.importorskip("transformers")
    written = model_builder.write_tokenizer(tmp_path / "tokenizer")
    names = sorted(p.name for p in SHIPPED_TOKENIZER.iterdir())
    assert names == sorted(p.name for p in written.iterdir())
    _, mismatch, errors = filecmp.cmpfiles(SHIPPED_TOKENIZER, written, names, shallow=False)
    assert not mismatch and not errors, f"server/tokenizer/ is stale: {mismatch or errors}"
