"""DPO with each pair's prompt shared is training-equivalent to TRL's own two rows a pair.

Our TokenizedDPOTrainer (TRL's DPOTrainer subclass) on a real Llama architecture with random
weights, train.share_prompt on and off: the fused head's per-token outputs and the LoRA
gradients through them, the reference logprobs TRL precomputes, and one SGD step's weights
and logged metrics must agree. The shared side runs grpo_train's CPU LM head, the other
TRL's own. If TRL stops calling the model it hands to _compute_loss and
compute_ref_log_probs, the shared path goes unused and these fail.
"""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from peft import LoraConfig
from test_shared_prompt import _head, _model
from trl import DPOConfig

from conftest import devices, openings
from hitchhiker.training import shared_prompt
from hitchhiker.training.dpo_trainer import SharedPrompt, TokenizedDPOTrainer


def _pairs(vocab: int, opening=()) -> list[dict]:
    """Prompts of different lengths; answers of different lengths, one of a single token; the
    first two pairs share a prompt (one state drawn in two replayed rounds). Every prompt
    opens with ``opening`` (a chat model's system turn)."""
    g = torch.Generator().manual_seed(2)

    def ids(n):
        return torch.randint(1, vocab, (n,), generator=g).tolist()

    prompts = [[*opening, *ids(n)] for n in (6, 11, 4)]
    shapes = [(0, 5, 3), (0, 2, 6), (1, 7, 1), (2, 4, 4)]  # (prompt, chosen length, rejected length)
    return [dict(prompt_ids=prompts[p], chosen_ids=ids(c), rejected_ids=ids(r)) for p, c, r in shapes]


def _trainer(tok, pairs, share, tmp_path, attn="sdpa", device="cpu", weighting=False):
    args = DPOConfig(
        output_dir=str(tmp_path / f"d{share}"), per_device_train_batch_size=len(pairs), num_train_epochs=1,
        learning_rate=1.0, optim="sgd", report_to=[], use_cpu=device == "cpu", bf16=False, logging_steps=1,
        save_strategy="no", seed=0, beta=0.1, precompute_ref_log_probs=True, max_length=None, disable_tqdm=True,
        gradient_checkpointing=False, use_weighting=weighting,
    )  # fmt: skip
    data = Dataset.from_list(pairs)
    # TRL caches the reference logprobs it precomputes by the data's fingerprint and the model's
    # hash, alike on both sides: each side its own, so that each computes them
    data._fingerprint = f"pairs-{share}-{attn}-{device}-{weighting}-{tmp_path.name}"
    torch.manual_seed(0)
    return TokenizedDPOTrainer(
        model=_model(len(tok), attn), args=args, train_dataset=data, processing_class=tok,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False),
        share_prompt=share,
    )  # fmt: skip


@pytest.mark.parametrize(
    "attn, weighting, opening", [("sdpa", False, ()), ("eager", True, ()), ("sdpa", False, (7, 3))]
)
def test_the_fused_heads_outputs_and_gradients_equal_the_unshared_ones(tok, tmp_path, attn, weighting, opening):
    # with an opening every prompt shares, it is computed once for the batch (asserted below)
    pairs = _pairs(len(tok), opening)
    trainer = _trainer(tok, pairs, True, tmp_path, attn, weighting=weighting)
    batch = trainer.data_collator(pairs)
    labels = batch["input_ids"].masked_fill(batch["completion_mask"] == 0, shared_prompt.IGNORE)
    kwargs = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels, use_cache=False)
    model, got = trainer.model, {}
    for share in (True, False):
        model.zero_grad()
        with _head(share), openings() as opened:
            out = (SharedPrompt(model, attn == "eager") if share else model)(**kwargs, fused_lm_head=True)
        assert opened == ([len(opening)] if share else [])
        (out.log_probs.sum() + 0.3 * out.entropy.sum()).backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        got[share] = (out, grads)
    (ours, ours_grads), (trls, trl_grads) = got[True], got[False]
    assert ours.log_probs.shape == trls.log_probs.shape == (2 * len(pairs), batch["input_ids"].shape[1] - 1)
    on = labels[:, 1:] != shared_prompt.IGNORE
    fields = ["log_probs", "entropy", "mean_logits", *(["log_sum_sq_probs"] if weighting else [])]
    for name in fields:  # everywhere: on the completions, and zero off them in both
        torch.testing.assert_close(getattr(ours, name), getattr(trls, name), atol=1e-5, rtol=1e-5)
    assert torch.equal(ours.is_top1 & on, trls.is_top1 & on) and not (ours.is_top1 & ~on).any()
    assert ours.log_probs[on].abs().min() > 0  # nothing vacuous: every completion token scored
    for name, g in trl_grads.items():
        assert g.norm() > 0, name
        assert (ours_grads[name] - g).norm() <= 1e-4 * g.norm(), name


def test_rows_not_laid_out_as_trls_collator_lays_them_are_left_to_trl(tok, tmp_path):
    pairs = _pairs(len(tok))
    trainer = _trainer(tok, pairs, True, tmp_path)
    batch = trainer.data_collator(pairs)
    labels = batch["input_ids"].masked_fill(batch["completion_mask"] == 0, shared_prompt.IGNORE)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    flush = shared_prompt.fused_output_flush_left
    assert flush(trainer.model, ids, mask, labels, eager=False) is not None
    truncated = labels.clone()
    truncated[0, (mask[0] == 1).nonzero().max()] = shared_prompt.IGNORE  # a completion cut short of its row's end
    assert flush(trainer.model, ids, mask, truncated, eager=False) is None
    unscored = torch.full_like(labels, shared_prompt.IGNORE)
    assert flush(trainer.model, ids, mask, unscored, eager=False) is None


@pytest.mark.parametrize("device", devices())
def test_one_training_step_ends_at_the_same_weights(tok, tmp_path, device, monkeypatch):
    pairs = _pairs(len(tok))
    calls, inner = [], shared_prompt.fused_fields
    monkeypatch.setattr(
        shared_prompt, "fused_fields", lambda *a, **k: calls.append(torch.is_grad_enabled()) or inner(*a, **k)
    )  # each call: with gradient or not
    weights, logs, refs, shared_calls = {}, {}, {}, {}
    for share in (True, False):
        calls.clear()
        with _head(share, device):
            trainer = _trainer(tok, pairs, share, tmp_path, device=device)
            data = trainer.train_dataset
            refs[share] = torch.tensor(list(data["ref_chosen_logps"]) + list(data["ref_rejected_logps"]))
            trainer.train()
        shared_calls[share] = list(calls)
        weights[share] = {n: p.detach().cpu() for n, p in trainer.model.named_parameters() if p.requires_grad}
        logs[share] = trainer.state.log_history[0]
    # the shared side computed the reference (no gradient) and the loss (with) packed; the other never
    assert shared_calls == {True: [False, True], False: []} and trainer.state.global_step == 1
    torch.testing.assert_close(refs[True], refs[False], atol=1e-5, rtol=1e-5)
    start = {
        n: p.detach().cpu()
        for n, p in _trainer(tok, pairs, True, tmp_path, device=device).model.named_parameters()
        if p.requires_grad
    }
    for name, w in weights[True].items():  # SGD: a weight's change is its gradient
        moved = (weights[False][name] - start[name]).norm()
        assert moved > 1e-6, name
        assert (w - weights[False][name]).norm() < 1e-4 * moved, name
    for key in ("loss", "rewards/margins", "logps/chosen", "logps/rejected", "logits/chosen", "logits/rejected",
                "entropy", "mean_token_accuracy", "num_tokens"):  # fmt: skip
        assert logs[True][key] == pytest.approx(logs[False][key], rel=1e-4, abs=1e-6), key
