"""Token ids -> text, one token at a time: incremental (exact) and naive (the failure mode).

A byte-level BPE token is a run of bytes, not of characters: 🧑🏿‍🚀 or 𠮷 can span several tokens,
and decoding each token alone turns every piece into U+FFFD. The incremental detokenizers hold
back an incomplete tail and emit it once the character is complete:

* `ByteLevelDetokenizer` (byte-level BPE, GPT-2 style, the tiny model's): a table of each token's
  bytes, fed to an incremental UTF-8 decoder (~0.4 us/token). Invalid bytes (a random model) become
  U+FFFD exactly as a full decode would, never an exception.
* `PrefixOffsetDetokenizer` (any other tokenizer: SentencePiece with byte fallback, WordPiece...):
  the vLLM/TGI scheme, decode a short window before and after the new token and emit the
  difference, holding back while the window ends in U+FFFD.
* `NaiveDetokenizer`: each token decoded on its own (`server-detokenizer`, broken variant).

`Vocabulary.from_tokenizer` inspects the tokenizer (transformers', or
server/text/fast_tokenizer.py's) once per server; each request then gets a fresh, cheap detokenizer
from `vocabulary.detokenizer(kind)`.
"""
from __future__ import annotations

import codecs
import json
from functools import lru_cache
from typing import Any, Callable, Protocol, Sequence

REPLACEMENT = "\ufffd"
# A character is at most 4 UTF-8 bytes, so at most 4 byte-fallback tokens: beyond this many held
# tokens the U+FFFD is real (invalid bytes), and holding longer would only stall the stream.
MAX_HELD_TOKENS = 6


class Detokenizer(Protocol):
    def push(self, token_id: int) -> str:
        """Text completed by this token ("" while a character is still incomplete)."""

    def flush(self) -> str:
        """What is still held at the end of generation (incomplete bytes become U+FFFD)."""


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-ins for the 256 byte values, reversed (char -> byte)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


class ByteLevelDetokenizer:
    __slots__ = ("_table", "_decode")

    def __init__(self, table: Sequence[bytes]) -> None:
        self._table = table
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode

    def push(self, token_id: int) -> str:
        try:
            return self._decode(self._table[token_id])
        except IndexError:  # an id past the tokenizer (a padded embedding): no text, as decode()
            return ""

    def flush(self) -> str:
        return self._decode(b"", True)


class NaiveDetokenizer:
    """Each token decoded alone: what a server that streams `decode([id])` sends."""

    __slots__ = ("_decode_one",)

    def __init__(self, decode_one: Callable[[int], str]) -> None:
        self._decode_one = decode_one

    def push(self, token_id: int) -> str:
        return self._decode_one(token_id)

    def flush(self) -> str:
        return ""


class PrefixOffsetDetokenizer:
    """Tokenizer-agnostic incremental decoding (as vLLM and TGI do it).

    `decode(ids[prefix:read])` is what was already emitted of the window, `decode(ids[prefix:])`
    the window with the new tokens; the difference is new text unless it ends in U+FFFD (an
    incomplete character). Decoding a window rather than single tokens keeps the tokenizer's
    context rules (SentencePiece's leading-space marker) right.
    """

    __slots__ = ("_decode", "_ids", "_prefix", "_read")

    def __init__(self, decode: Callable[[Sequence[int]], str]) -> None:
        self._decode = decode
        self._ids: list[int] = []
        self._prefix = 0
        self._read = 0

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        ids = self._ids
        before = self._decode(ids[self._prefix:self._read])
        after = self._decode(ids[self._prefix:])
        held = len(ids) - self._read
        if len(after) > len(before) and (not after.endswith(REPLACEMENT) or held > MAX_HELD_TOKENS):
            self._prefix, self._read = self._read, len(ids)
            return after[len(before):]
        return ""

    def flush(self) -> str:
        if self._read == len(self._ids):
            return ""
        before = self._decode(self._ids[self._prefix:self._read])
        after = self._decode(self._ids[self._prefix:])
        self._prefix = self._read = len(self._ids)
        return after[len(before):]


class Vocabulary:
    """What the detokenizers need from a tokenizer, prepared once per server."""

    def __init__(self, decode: Callable[[Sequence[int]], str],
                 byte_table: list[bytes] | None) -> None:
        self._decode = decode
        self.byte_table = byte_table
        self._naive_table = ([b.decode("utf-8", "replace") for b in byte_table]
                             if byte_table is not None else None)

    @property
    def byte_level(self) -> bool:
        return self.byte_table is not None

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> "Vocabulary":
        def decode(ids: Sequence[int]) -> str:
            # Never strict: a random model emits invalid UTF-8 (the tokenizer replaces it).
            return tokenizer.decode(list(ids), skip_special_tokens=True,
                                    clean_up_tokenization_spaces=False)

        return cls(decode, _byte_table(tokenizer))

    def detokenizer(self, kind: str = "incremental") -> Detokenizer:
        if kind == "naive":
            table = self._naive_table
            if table is not None:
                return NaiveDetokenizer(lambda token_id: table[token_id] if token_id < len(table) else "")
            return NaiveDetokenizer(lambda token_id: self._decode([token_id]))
        if kind != "incremental":
            raise ValueError(f"unknown detokenizer {kind!r}")
        if self.byte_table is not None:
            return ByteLevelDetokenizer(self.byte_table)
        return PrefixOffsetDetokenizer(self._decode)


def _byte_table(tokenizer: Any) -> list[bytes] | None:
    """Each token id's bytes when the tokenizer is plain byte-level BPE, else None.

    Special tokens map to b"" (skipped, as decode(skip_special_tokens=True) does); other added
    tokens to their text. Anything unexpected (another decoder, a token outside GPT-2's byte
    alphabet) means the generic detokenizer is used instead: exactness first, speed second.
    """
    if _decoder_type(tokenizer) != "ByteLevel":
        return None
    size = len(tokenizer)
    special = set(getattr(tokenizer, "all_special_ids", ()))
    added = {i: t.content for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items()}
    byte_of = _byte_decoder()
    table: list[bytes] = []
    for token_id, token in enumerate(tokenizer.convert_ids_to_tokens(list(range(size)))):
        if token_id in special:
            table.append(b"")
        elif token_id in added:
            table.append(added[token_id].encode())
        elif token is None or any(ch not in byte_of for ch in token):
            return None
        else:
            table.append(bytes(byte_of[ch] for ch in token))
    return table


def _decoder_type(tokenizer: Any) -> str | None:
    """The tokenizer's decoder, from the Rust tokenizer's JSON (transformers' and
    server/text/fast_tokenizer.py's both hold one as `backend_tokenizer`), or as a tokenizer
    states it."""
    stated = getattr(tokenizer, "decoder_type", None)
    if isinstance(stated, str):
        return stated
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        return (json.loads(backend.to_str()).get("decoder") or {}).get("type")
    except (ValueError, AttributeError):
        return None
