"""The offline model builder: reproducible, atomic, loadable like any hub model."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from server.tools import model_builder  # noqa: E402

# Text the corpus never saw, split across tokens: CJK extension B, skin tones, ZWJ, Greek.
HARD_TEXT = "鬱蒼とした森で𠮷野家の🦩と🧑🏿‍🚀が踊る — Ωμέγα 👩🏽‍🚒 ∮ ½ \t\n end"


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_builder.build(tmp_path_factory.mktemp("builder") / "tiny")


def test_rebuild_is_byte_identical(built: Path, tmp_path: Path) -> None:
    again = model_builder.build(tmp_path / "again")
    assert _hashes(built) == _hashes(again)
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(
        _hashes(built))


def test_loads_with_auto_classes_offline(built: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built)
    model = AutoModelForCausalLM.from_pretrained(built)
    assert len(tok) == model.config.vocab_size == model_builder.VOCAB_SIZE
    assert model.config.hidden_size == 128 and model.config.num_hidden_layers == 4
    assert tok.eos_token == model_builder.IM_END
    assert tok.convert_tokens_to_ids(model_builder.IM_END) in model.config.eos_token_id
    ids = tok.encode(HARD_TEXT, add_special_tokens=False)
    assert tok.decode(ids) == HARD_TEXT
    assert max(ids) < len(tok)


def test_chat_template_is_chatml(built: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(built)
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hi 🦩"}]}]
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == ("<|im_start|>system\nbe brief<|im_end|>\n"
                    "<|im_start|>user\nhi 🦩<|im_end|>\n<|im_start|>assistant\n")
    ids = tok.encode(text, add_special_tokens=False)
    # Special tokens are single ids, never split into bytes.
    assert ids.count(tok.convert_tokens_to_ids(model_builder.IM_START)) == 3


def test_interrupted_build_leaves_nothing_that_looks_complete(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "tiny"
    out.mkdir()
    (out / "config.json").write_text("{}")  # a previous, complete build

    def boom(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(model_builder, "build_model", boom)
    with pytest.raises(KeyboardInterrupt):
        model_builder.build(out)
    assert (out / "config.json").read_text() == "{}"  # the old build is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny"]  # no temp folder left


def test_cli_writes_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "m"
    assert model_builder.main(["--out", str(out)]) == 0
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()


def test_gpu_size_is_a_larger_config_of_the_same_family() -> None:
    gpu, tiny = model_builder.SIZES["gpu"], model_builder.SIZES["tiny"]
    assert gpu.hidden_size > tiny.hidden_size and gpu.num_hidden_layers > tiny.num_hidden_layers
    assert gpu.hidden_size % gpu.num_attention_heads == 0
    assert gpu.num_attention_heads % gpu.num_key_value_heads == 0
