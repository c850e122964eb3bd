"""A byte-level BPE tokenizer in pure Python: the synthetic engine's tokenizer without transformers.

    tokenizer = ByteLevelBPE.from_folder(SHIPPED)       # server/tokenizer/: the tiny model's own
    tokenizer.encode("Hello 🦩", add_special_tokens=False)  # the ids transformers gives
    tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

`--engine synthetic` emits token ids without a forward pass, but it still needs the model's
tokenizer to turn a prompt or a lab script into ids and ids into text. The base install has no
transformers or tokenizers (they are the `model` extra, with torch), so this reads the same
`tokenizer.json` (and `tokenizer_config.json`, `chat_template.jinja`) and does what the Rust
tokenizer does for this kind of tokenizer (GPT-2's): special tokens split out first, GPT-2's
pre-tokenizer regex, bytes mapped to printable stand-ins, merges applied lowest rank first. The
ids are the same (tests/server/test_bpe.py compares them with transformers where it is
installed); with transformers installed the server uses transformers' tokenizer anyway.

Only that kind is read (`from_folder` raises ValueError for anything else). Encoding is slower
than Rust's (~1 ms for a 1,500-character script), which the prompt cache absorbs (a lab script
is the same text for every stream). The interface is the part of transformers' the server uses.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import regex

SHIPPED = Path(__file__).resolve().parent / "tokenizer"

# GPT-2's pre-tokenizer, as tokenizers' ByteLevel(use_regex=True) has it; `\s` spelled as the
# Unicode White_Space property, which is what the Rust side's `\s` matches (Python's `\s` also
# takes \x1c-\x1f).
_SPLIT = regex.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+"
                       r"|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+")
_WORD_CACHE = 65536  # distinct pre-tokenized words kept (a few MB at most)


@functools.lru_cache(maxsize=1)
def byte_chars() -> tuple[str, ...]:
    """GPT-2's printable stand-in for each byte value (index = byte)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars = dict(zip(printable, printable))
    extra = 0
    for byte in range(256):
        if byte not in chars:
            chars[byte] = 256 + extra
            extra += 1
    return tuple(chr(chars[byte]) for byte in range(256))


@dataclass(frozen=True)
class AddedToken:
    content: str
    special: bool = True


class ByteLevelBPE:
    def __init__(self, vocab: Mapping[str, int], merges: Iterable[tuple[str, str]],
                 added: Mapping[int, AddedToken], config: Mapping[str, Any],
                 chat_template: str | None, name_or_path: str = "") -> None:
        self.name_or_path = name_or_path
        self._vocab = dict(vocab)
        for token_id, token in added.items():
            self._vocab[token.content] = token_id
        self._tokens: list[str | None] = [None] * (max(self._vocab.values()) + 1)
        for token, token_id in self._vocab.items():
            self._tokens[token_id] = token
        self._ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.added_tokens_decoder = dict(added)
        self.chat_template = chat_template
        self.model_max_length = int(config.get("model_max_length") or 1_000_000_000)
        self.eos_token = config.get("eos_token")
        self.pad_token = config.get("pad_token")
        self.bos_token = config.get("bos_token")
        self.eos_token_id = self._vocab.get(self.eos_token) if self.eos_token else None
        self.pad_token_id = self._vocab.get(self.pad_token) if self.pad_token else None
        named = [config.get(k) for k in ("bos_token", "eos_token", "unk_token", "pad_token")]
        extra = list(config.get("extra_special_tokens") or config.get("additional_special_tokens") or [])
        self.all_special_ids = list(dict.fromkeys(
            self._vocab[t] for t in [*named, *extra] if isinstance(t, str) and t in self._vocab))
        self._special_ids = frozenset(i for i, t in added.items() if t.special)
        # Added tokens are matched in the raw text before anything else, longest first.
        contents = sorted((t.content for t in added.values()), key=len, reverse=True)
        self._added_split = (regex.compile("(" + "|".join(regex.escape(c) for c in contents) + ")")
                             if contents else None)
        self._chars = byte_chars()
        self._bytes = {c: b for b, c in enumerate(self._chars)}
        self._word_ids = functools.lru_cache(maxsize=_WORD_CACHE)(self._bpe)

    # -- loading ----------------------------------------------------------------------------------

    @classmethod
    def from_folder(cls, folder: str | Path) -> "ByteLevelBPE":
        """Read a saved tokenizer (save_pretrained's files); ValueError when it is not of this kind."""
        folder = Path(folder)
        data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        model, pre = data.get("model") or {}, data.get("pre_tokenizer") or {}
        if (model.get("type") != "BPE" or data.get("normalizer") is not None
                or pre.get("type") != "ByteLevel" or pre.get("add_prefix_space")
                or not pre.get("use_regex", True) or (data.get("decoder") or {}).get("type") != "ByteLevel"
                or model.get("dropout") or model.get("continuing_subword_prefix")
                or model.get("end_of_word_suffix") or model.get("byte_fallback")
                or model.get("ignore_merges")):
            raise ValueError(f"{folder}: not a plain byte-level BPE tokenizer (GPT-2's kind); "
                             "reading it needs transformers")
        merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        added = {int(t["id"]): AddedToken(t["content"], bool(t.get("special", True)))
                 for t in data.get("added_tokens") or []}
        config_path = folder / "tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
        template_path = folder / "chat_template.jinja"
        template = (template_path.read_text(encoding="utf-8") if template_path.is_file()
                    else config.get("chat_template"))
        return cls(model["vocab"], merges, added, config, template, name_or_path=str(folder))

    # -- the interface the server uses ------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._tokens)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of `text` (nothing is added: this tokenizer's post-processor adds nothing)."""
        ids: list[int] = []
        pieces = self._added_split.split(text) if self._added_split is not None else [text]
        for i, piece in enumerate(pieces):
            if i % 2:  # an added token's text, matched whole
                ids.append(self._vocab[piece])
            elif piece:
                for word in _SPLIT.findall(piece):
                    ids.extend(self._word_ids(word))
        return ids

    def _bpe(self, word: str) -> tuple[int, ...]:
        chars = self._chars
        parts = [chars[b] for b in word.encode("utf-8")]
        ranks = self._ranks
        while len(parts) > 1:
            best, at = None, -1
            for i in range(len(parts) - 1):
                rank = ranks.get((parts[i], parts[i + 1]))
                if rank is not None and (best is None or rank < best):
                    best, at = rank, i
            if best is None:
                break
            pair = (parts[at], parts[at + 1])
            merged: list[str] = []
            i = 0
            while i < len(parts):  # every occurrence of the pair, left to right
                if i < len(parts) - 1 and (parts[i], parts[i + 1]) == pair:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return tuple(self._vocab[p] for p in parts)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool = False) -> str:
        out: list[str] = []
        run = bytearray()
        for token_id in ids:
            token_id = int(token_id)
            if token_id in self.added_tokens_decoder:
                if run:
                    out.append(run.decode("utf-8", "replace"))
                    run.clear()
                if not (skip_special_tokens and token_id in self._special_ids):
                    out.append(self.added_tokens_decoder[token_id].content)
                continue
            token = self._tokens[token_id] if 0 <= token_id < len(self._tokens) else None
            if token is not None:
                run.extend(self._bytes[c] for c in token)
        if run:
            out.append(run.decode("utf-8", "replace"))
        return "".join(out)

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> Any:
        if isinstance(ids, int):
            return self._tokens[ids] if 0 <= ids < len(self._tokens) else None
        return [self.convert_ids_to_tokens(int(i)) for i in ids]

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> Any:
        if isinstance(tokens, str):
            return self._vocab.get(tokens)
        return [self._vocab.get(t) for t in tokens]

    def apply_chat_template(self, messages: Sequence[Mapping[str, Any]],
                            add_generation_prompt: bool = False, tokenize: bool = True,
                            **kwargs: Any) -> Any:
        if not self.chat_template:
            raise ValueError(f"{self.name_or_path}: the tokenizer has no chat template")
        text = _template(self.chat_template).render(
            messages=list(messages), add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token or "", eos_token=self.eos_token or "",
            pad_token=self.pad_token or "", **kwargs)
        return self.encode(text) if tokenize else text

    # What server/detokenizer.py reads to build its byte table (transformers: backend_tokenizer).
    decoder_type = "ByteLevel"


@functools.lru_cache(maxsize=8)
def _template(source: str) -> Any:
    """The template compiled as transformers compiles chat templates (sandboxed, trim/lstrip)."""
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)
