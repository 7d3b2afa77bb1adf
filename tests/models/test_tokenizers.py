"""A model's tokenizer from the models file: a small byte-level BPE trained here, offline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from covey.config.settings import Settings
from covey.models.catalog import Catalog, ModelsFileError
from covey.models.tokenizers import SimTokenizer, TokenizerError, load
from covey.models.tokens import ESTIMATE_OVERHEAD_TOKENS, byte_tokens, estimate_prompt_tokens, prompt_text

CORPUS = [
    "The quick brown fox jumps over the lazy dog. What is 6 * 7? The answer is 42.",
    '{"role":"user","content":"summarise the report"},{"role":"assistant","content":"done"}',
    "def add(a, b):\n    return a + b\n",
    "請用一句話總結這段文字的主旨。",
    "You are agent, an agent of covey at depth 0. Summarise the report in one word.",
] * 50


def train(path: Path) -> Tokenizer:
    """A byte-level BPE like GPT's, trained from the corpus in well under a second."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    tokenizer.save(str(path))
    return tokenizer


@pytest.fixture
def trained(tmp_path) -> tuple[Path, Tokenizer]:
    path = tmp_path / "fast" / "tokenizer.json"
    path.parent.mkdir()
    return path, train(path)


def models_file(tmp_path: Path, tokenizer: str) -> Settings:
    path = tmp_path / "models.toml"
    path.write_text(
        f'[models.fast]\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "FAST_KEY"\ntokenizer = "{tokenizer}"\n'
    )
    return Settings(models=path)


def test_a_tokenizer_json_beside_the_models_file_counts_exactly(tmp_path, trained):
    _, reference = trained
    catalog = Catalog.from_settings(models_file(tmp_path, "fast/tokenizer.json"), environ={"FAST_KEY": "k"})
    tokenizer = catalog.endpoint("fast").tokenizer
    messages = [{"role": "user", "content": "The quick brown fox: what is 6 * 7?"}]
    text = prompt_text(messages, None)
    assert tokenizer.count(text) == len(reference.encode(text, add_special_tokens=False).ids)
    bound = estimate_prompt_tokens(messages, None, tokenizer)
    assert bound == tokenizer.count(text) + ESTIMATE_OVERHEAD_TOKENS
    assert bound < byte_tokens(text)  # English the BPE has seen: under a token a byte
    assert [row.tokenizer for row in catalog.served() if row.name == "fast"] == [str(tmp_path / "fast/tokenizer.json")]


def test_a_missing_or_broken_tokenizer_stops_the_models_file_naming_the_model(tmp_path):
    with pytest.raises(ModelsFileError, match=r"model 'fast': tokenizer .*nope.json: no such file"):
        Catalog.from_settings(models_file(tmp_path, "nope.json"), environ={})
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ModelsFileError, match=r"model 'fast': tokenizer .*bad.json: cannot be loaded"):
        Catalog.from_settings(models_file(tmp_path, "bad.json"), environ={})


PLUGIN = """
ENCODING_CONSTRUCTORS = {"covey_bytes": lambda: {
    "name": "covey_bytes",
    "pat_str": r"\\S+|\\s+",
    "mergeable_ranks": {bytes([b]): b for b in range(256)} | {b"the": 256, b" the": 257},
    "special_tokens": {"<|endoftext|>": 258},
}}
"""


def test_a_tiktoken_encoding_that_loads_locally_counts_exactly(tmp_path, monkeypatch):
    tiktoken = pytest.importorskip("tiktoken")
    plugin = tmp_path / "tiktoken_ext"  # tiktoken's own plugin namespace: an encoding with no download
    plugin.mkdir()
    (plugin / "covey_test_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    catalog = Catalog.from_settings(models_file(tmp_path, "tiktoken:covey_bytes"), environ={"FAST_KEY": "k"})
    tokenizer = catalog.endpoint("fast").tokenizer
    text = "the cat <|endoftext|> the"  # a special token's text in a message is counted as text
    assert tokenizer.name == "tiktoken:covey_bytes"
    assert tokenizer.count(text) == len(tiktoken.get_encoding("covey_bytes").encode(text, disallowed_special=()))
    assert tokenizer.count("the the") == 3  # "the", " ", "the": fewer than its 7 bytes


def test_a_tiktoken_encoding_that_does_not_load_stops_the_models_file(tmp_path):
    pytest.importorskip("tiktoken")
    with pytest.raises(ModelsFileError, match=r"model 'fast': tokenizer tiktoken:no_such_encoding: does not load"):
        Catalog.from_settings(models_file(tmp_path, "tiktoken:no_such_encoding"), environ={})


@pytest.mark.skipif(importlib.util.find_spec("tiktoken") is not None, reason="tiktoken is installed here")
def test_a_tiktoken_encoding_without_tiktoken_says_what_to_install():
    with pytest.raises(TokenizerError, match=r"tiktoken:o200k_base: pip install 'covey\[tiktoken\]'"):
        load("tiktoken:o200k_base")


def test_the_sims_count_is_its_billing():
    from covey.models.sim import directives

    messages = [{"role": "user", "content": "請計算 What is 6 * 7?"}]
    sim = SimTokenizer()
    assert sim.count(prompt_text(messages, None)) == directives.prompt_tokens(messages, None)
    dense = [{"role": "user", "content": "[sim:bill bytes] 請計算"}]
    assert sim.count(prompt_text(dense, None)) == directives.prompt_tokens(dense, None, "bytes")
