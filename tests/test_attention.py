"""hitchhiker.training.attention: on the CPU, transformers' sdpa attention without copying a
grouped-query model's key/value heads, and the same results.

A real Llama architecture (random weights, 4 query heads on 2 key/value heads, float32 and
bfloat16) on a left-padded batch: the logits equal transformers' own sdpa's bit for bit, the
gradients within float rounding, and generation (greedy and sampled, through its KV cache)
gives the same tokens. If transformers stops routing Llama's attention through its
AttentionInterface, or starts passing grouped heads to torch itself, these fail.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import transformers.integrations.sdpa_attention as hf_sdpa
from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM

from hitchhiker.training import attention

VOCAB = 50
# each gradient's distance from transformers' own, relative to its norm: the key/value heads'
# gradients sum over their query heads in another order (float32: measured 0; bfloat16: 0.6%)
TOLERANCE = {torch.float32: 1e-6, torch.bfloat16: 2e-2}


@contextlib.contextmanager
def _sdpa(ours: bool):
    """transformers' sdpa attention (ours False) or hitchhiker's, for the block."""
    saved = AttentionInterface()["sdpa"]  # a fresh interface reads the library-wide mapping
    AttentionInterface.register("sdpa", attention.sdpa if ours else hf_sdpa.sdpa_attention_forward)
    try:
        yield
    finally:
        AttentionInterface.register("sdpa", saved)


def _model(dtype=torch.float32) -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, attn_implementation="sdpa",
    )  # fmt: skip
    return LlamaForCausalLM(cfg).to(dtype)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Three prompts of 9, 5 and 2 tokens, left-padded."""
    g = torch.Generator().manual_seed(1)
    ids, mask = torch.zeros(3, 9, dtype=torch.long), torch.zeros(3, 9, dtype=torch.long)
    for row, n in enumerate((9, 5, 2)):
        ids[row, 9 - n :], mask[row, 9 - n :] = torch.randint(1, VOCAB, (n,), generator=g), 1
    return ids, mask


def _run(model, ours: bool, copies: list) -> dict:
    ids, mask = _batch()
    with _sdpa(ours):
        model.zero_grad()
        logits = model(input_ids=ids, attention_mask=mask).logits
        logp = logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        (logp * mask[:, 1:]).sum().backward()
        out = {"logits": logits.detach(), "grads": {n: p.grad.clone() for n, p in model.named_parameters()}}
        out["copied"] = len(copies) > 0  # by the forward and backward passes
        with torch.no_grad():
            for sample in (False, True):
                torch.manual_seed(2)
                out[f"tokens {sample}"] = model.generate(
                    input_ids=ids, attention_mask=mask, do_sample=sample, max_new_tokens=6, pad_token_id=0
                )
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_same_logits_gradients_and_tokens_without_the_copies(monkeypatch, dtype):
    copies = []
    repeat = hf_sdpa.repeat_kv
    monkeypatch.setattr(hf_sdpa, "repeat_kv", lambda x, n: copies.append(n) or repeat(x, n))
    model = _model(dtype)
    theirs = _run(model, ours=False, copies=copies)
    assert theirs["copied"], (
        "transformers' sdpa no longer repeats key/value heads: hitchhiker.training.attention can go"
    )
    copies.clear()
    ours = _run(model, ours=True, copies=copies)
    assert copies == [], "hitchhiker.training.attention's sdpa still copied the key/value heads"
    assert torch.equal(ours["logits"], theirs["logits"])
    for name, grad in theirs["grads"].items():
        apart = ((ours["grads"][name] - grad).float().norm() / grad.float().norm()).item()
        assert apart <= TOLERANCE[dtype], f"{name}: {apart:.2e} apart"
    for sample in (False, True):
        assert torch.equal(ours[f"tokens {sample}"], theirs[f"tokens {sample}"])


def test_transformers_still_repeats_grouped_heads_under_a_mask():
    """The day this fails, transformers passes grouped heads to torch itself: delete hitchhiker.training.attention."""
    kv, mask = torch.zeros(1, 2, 3, 8), torch.ones(1, 1, 3, 3, dtype=torch.bool)
    assert not hf_sdpa.use_gqa_in_sdpa(mask, kv, kv)


def test_a_loaded_policy_runs_ours(tmp_path):
    """policy.load_model registers it: a policy's sdpa attention is hitchhiker's."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from hitchhiker import policy

    _model().save_pretrained(tmp_path / "model")
    policy.write_spec(tmp_path, "model", 0)
    with _sdpa(ours=False):
        model = policy.load_model(tmp_path, {"dtype": "float32", "trust_remote_code": False})
        assert model.config._attn_implementation == "sdpa"
        assert ALL_ATTENTION_FUNCTIONS["sdpa"] is attention.sdpa
