"""Detokenizers: the incremental ones are exact, token by token; the naive one shows U+FFFD."""
from __future__ import annotations

import string

import pytest

from server.text.detokenizer import (
    ByteLevelDetokenizer,
    NaiveDetokenizer,
    PrefixOffsetDetokenizer,
    Vocabulary,
)

JAPANESE = "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る"
TEXTS = [
    pytest.param(JAPANESE, id="japanese-and-emoji"),
    pytest.param("👋🏽 👍🏿 🧑🏻‍💻 thumbs with skin tones", id="skin-tones"),
    pytest.param("family 👩‍👩‍👧‍👦, flag 🏳️‍🌈, 🇯🇵🇫🇷", id="zwj-and-flags"),
    # Text the tokenizer's training corpus never saw.
    pytest.param("Zwölf Boxkämpfer jagen Viktor über den Deich; Ωμέγα, 한국어 텍스트, 🫠🪿🪼, "
                 "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and e\u0301 combining", id="unseen-text"),
    pytest.param("plain ASCII, nothing special.", id="ascii"),
]


def stream(detokenizer, ids: list[int]) -> tuple[list[str], str]:
    pieces = [detokenizer.push(i) for i in ids]
    return pieces, "".join(pieces) + detokenizer.flush()


@pytest.fixture(scope="module")
def byte_level(tokenizer):
    return Vocabulary.from_tokenizer(tokenizer)


@pytest.fixture(scope="module")
def sentencepiece_like():
    """A non-byte-level tokenizer: SentencePiece-style `▁` spaces, byte fallback for the rest."""
    from tokenizers import Tokenizer, decoders, models, normalizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0}
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = len(vocab)
    for char in "▁" + string.ascii_letters + string.digits + ".,!?;":
        vocab.setdefault(char, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], byte_fallback=True, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def test_the_tokenizer_takes_the_byte_level_fast_path(byte_level):
    assert byte_level.byte_level
    assert isinstance(byte_level.detokenizer("incremental"), ByteLevelDetokenizer)
    assert isinstance(byte_level.detokenizer("naive"), NaiveDetokenizer)


@pytest.mark.parametrize("text", TEXTS)
def test_incremental_byte_level_is_exact(tokenizer, byte_level, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    pieces, out = stream(byte_level.detokenizer("incremental"), ids)
    assert out == text
    assert not any("\ufffd" in piece for piece in pieces)


def test_a_character_split_across_tokens_is_held_until_complete(tokenizer, byte_level):
    ids = tokenizer.encode("🧑🏿‍🚀", add_special_tokens=False)
    assert len(ids) > 1, "the test needs an emoji the tokenizer splits"
    pieces, out = stream(byte_level.detokenizer("incremental"), ids)
    assert "" in pieces  # something was held back
    assert out == "🧑🏿‍🚀"


def test_naive_shows_replacement_characters_where_incremental_is_exact(tokenizer, byte_level):
    ids = tokenizer.encode(JAPANESE, add_special_tokens=False)
    _, naive = stream(byte_level.detokenizer("naive"), ids)
    _, incremental = stream(byte_level.detokenizer("incremental"), ids)
    assert incremental == JAPANESE
    assert naive.count("\ufffd") > 0


def test_invalid_bytes_become_replacement_characters_never_an_error(tokenizer, byte_level):
    """A random model emits byte tokens that are not UTF-8: replaced as a full decode would."""
    table = byte_level.byte_table
    single = {table[i][0]: i for i in range(len(table)) if len(table[i]) == 1}
    # A lone continuation byte, a 4-byte lead cut short by ASCII, 0xFF, and a truncated tail.
    raw = [0x80, ord("a"), 0xF0, 0x9F, ord("b"), 0xFF, ord("c"), 0xE3, 0x81]
    ids = [single[b] for b in raw]
    _, out = stream(byte_level.detokenizer("incremental"), ids)
    assert out == bytes(raw).decode("utf-8", "replace")
    assert out == tokenizer.decode(ids)
    assert out.startswith("\ufffda") and out.endswith("c\ufffd")


def test_special_tokens_and_out_of_range_ids_produce_no_text(tokenizer, byte_level):
    ids = tokenizer.encode("hi", add_special_tokens=False)
    special = tokenizer.all_special_ids[0]
    _, out = stream(byte_level.detokenizer("incremental"), [*ids, special, 10**6])
    assert out == "hi"


@pytest.mark.parametrize("text", TEXTS)
def test_generic_incremental_is_exact_for_a_non_byte_level_tokenizer(sentencepiece_like, text):
    vocabulary = Vocabulary.from_tokenizer(sentencepiece_like)
    assert not vocabulary.byte_level
    detokenizer = vocabulary.detokenizer("incremental")
    assert isinstance(detokenizer, PrefixOffsetDetokenizer)
    ids = sentencepiece_like.encode(text, add_special_tokens=False)
    pieces, out = stream(detokenizer, ids)
    assert out == sentencepiece_like.decode(ids) == text
    assert not any("\ufffd" in piece for piece in pieces)


def test_generic_invalid_bytes_are_replaced_and_flushed(sentencepiece_like):
    ids = sentencepiece_like.convert_tokens_to_ids(["<0x80>", "A", "<0xE3>", "<0x81>"])
    _, out = stream(Vocabulary.from_tokenizer(sentencepiece_like).detokenizer("incremental"), ids)
    assert out == sentencepiece_like.decode(ids)
    assert "\ufffd" in out and "A" in out


def test_generic_naive_garbles_what_the_incremental_keeps(sentencepiece_like):
    vocabulary = Vocabulary.from_tokenizer(sentencepiece_like)
    ids = sentencepiece_like.encode("Hello 鬱蒼 world", add_special_tokens=False)
    _, naive = stream(vocabulary.detokenizer("naive"), ids)
    assert "\ufffd" in naive


def test_generic_holds_back_only_a_bounded_number_of_invalid_tokens(sentencepiece_like):
    """A model stuck emitting lead bytes must not stall the stream until the end."""
    lead = sentencepiece_like.convert_tokens_to_ids("<0xF0>")
    detokenizer = Vocabulary.from_tokenizer(sentencepiece_like).detokenizer("incremental")
    pieces = [detokenizer.push(lead) for _ in range(20)]
    assert any(pieces[:10])
