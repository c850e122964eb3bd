"""A model's tokenizer read with the `tokenizers` library alone: no transformers, no torch.

    tokenizer = FastTokenizer.from_folder(SHIPPED_TOKENIZER)  # server/tokenizer/: the tiny model's own
    tokenizer.encode("Hello 🦩", add_special_tokens=False)  # the ids transformers gives
    tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

A folder saved by transformers with its generic class (`"tokenizer_class": "TokenizersBackend"`
in transformers 5, `"PreTrainedTokenizerFast"` before; the lab's tiny model is one) holds the whole tokenizer in
`tokenizer.json`, which the Rust `tokenizers` library runs itself; transformers adds the special
tokens named in `tokenizer_config.json` and the chat template, which this reads too. So the
synthetic engine (a base install has no transformers) and the transformers engine with the lab's
model (its import of AutoTokenizer took ~1 s of the server's start) use this. Any other class
(a model-specific tokenizer with its own Python code) is transformers' to load: `from_folder`
raises ValueError. tests/server/test_fast_tokenizer.py compares ids, text and template with
transformers' own.

The interface is the part of transformers' tokenizers the server uses.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

GENERIC_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


class FastTokenizer:
    def __init__(self, backend: Any, config: Mapping[str, Any], chat_template: str | None,
                 name_or_path: str = "") -> None:
        # `backend_tokenizer` is transformers' name for the Rust tokenizer: server/text/detokenizer.py
        # reads its decoder from there for both kinds.
        self.backend_tokenizer = backend
        self.name_or_path = name_or_path
        self.chat_template = chat_template
        self.model_max_length = int(config.get("model_max_length") or 1_000_000_000)
        self.added_tokens_decoder = dict(backend.get_added_tokens_decoder())
        self.bos_token = _content(config.get("bos_token"))
        self.eos_token = _content(config.get("eos_token"))
        self.pad_token = _content(config.get("pad_token"))
        self.eos_token_id = backend.token_to_id(self.eos_token) if self.eos_token else None
        self.pad_token_id = backend.token_to_id(self.pad_token) if self.pad_token else None
        named = [_content(config.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")]
        extra = [_content(t) for t in
                 (config.get("extra_special_tokens") or config.get("additional_special_tokens") or [])]
        ids = (backend.token_to_id(t) for t in [*named, *extra] if isinstance(t, str))
        self.all_special_ids = list(dict.fromkeys(i for i in ids if i is not None))

    @classmethod
    def from_folder(cls, folder: str | Path) -> "FastTokenizer":
        """Read a saved tokenizer; ValueError when its class needs transformers' own code."""
        from tokenizers import Tokenizer

        folder = Path(folder)
        config_path = folder / "tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
        kind = config.get("tokenizer_class", GENERIC_CLASSES[0])
        if kind not in GENERIC_CLASSES or not (folder / "tokenizer.json").is_file():
            raise ValueError(f"{folder}: a {kind} tokenizer, or no tokenizer.json: reading it needs "
                             "transformers")
        template_path = folder / "chat_template.jinja"
        template = (template_path.read_text(encoding="utf-8") if template_path.is_file()
                    else config.get("chat_template"))
        return cls(Tokenizer.from_file(str(folder / "tokenizer.json")), config, template, str(folder))

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool = False) -> str:
        return self.backend_tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> Any:
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(int(i)) for i in ids]

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> Any:
        if isinstance(tokens, str):
            return self.backend_tokenizer.token_to_id(tokens)
        return [self.backend_tokenizer.token_to_id(t) for t in tokens]

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


def _content(token: Any) -> str | None:
    """A special token as tokenizer_config.json states it: a string, or an AddedToken's dict."""
    if isinstance(token, dict):
        return token.get("content")
    return token if isinstance(token, str) else None


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
