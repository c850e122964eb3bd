"""The prompt encoder: the same ids as the tokenizer's own encode, and the cache is only a cache."""
from __future__ import annotations

import pytest

from server.text.prompts import CACHED_CHARS, PromptEncoder

MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る <|im_end|> done"}]


@pytest.fixture()
def encoder(tokenizer) -> PromptEncoder:
    return PromptEncoder(tokenizer)


def wrapper_ids(tokenizer, messages, script):
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return (tokenizer.encode(prompt, add_special_tokens=False),
            None if script is None else tokenizer.encode(script, add_special_tokens=False))


@pytest.mark.parametrize("script", [None, "", "Every token should reach the reader. 🦩 " * 40])
def test_ids_match_the_tokenizer_cold_and_cached(encoder, tokenizer, script):
    expected = wrapper_ids(tokenizer, MESSAGES, script)
    assert encoder.encode(MESSAGES, script) == expected
    hits = encoder.hits
    assert encoder.encode(MESSAGES, script) == expected  # the second time from the cache
    assert encoder.hits > hits


def test_messages_that_join_alike_are_not_confused(encoder, tokenizer):
    """A content holding what would separate messages in a joined key stays its own prompt."""
    one = [{"role": "user", "content": "a\x00user\x01b"}]
    two = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert encoder.encode(one, None) == wrapper_ids(tokenizer, one, None)
    assert encoder.encode(two, None) == wrapper_ids(tokenizer, two, None)
    assert encoder.encode(one, None)[0] != encoder.encode(two, None)[0]


def test_a_caller_cannot_change_what_the_cache_holds(encoder):
    ids, _ = encoder.encode(MESSAGES, None)
    ids.append(-1)
    assert encoder.encode(MESSAGES, None)[0][-1] != -1


def test_long_texts_are_encoded_but_not_kept(encoder, tokenizer):
    long_text = "word " * (CACHED_CHARS // 5 + 10)
    assert encoder.ids(long_text) == tokenizer.encode(long_text, add_special_tokens=False)
    assert long_text not in encoder._cache
