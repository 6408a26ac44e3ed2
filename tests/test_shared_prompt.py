"""The shared-prompt step is training-equivalent to TRL's row-by-row computation.

Both run through our ReplayGRPOTrainer (TRL's GRPOTrainer subclass) on a real Llama
architecture with random weights: the per-token logprobs, the LoRA gradients and one step of
training must agree with train.share_prompt off. If TRL stops routing its logprobs through
_get_per_token_logps_and_entropies, or changes its fused LM head, these fail.
"""

from __future__ import annotations

import contextlib
import inspect

import pandas as pd
import pytest
import torch
import trl.trainer.utils
from datasets import Dataset
from peft import LoraConfig
from transformers import LlamaConfig, LlamaForCausalLM
from trl import GRPOConfig

from conftest import devices, openings
from hitchhiker.training import lm_head, shared_prompt
from hitchhiker.training.objectives.grpo import environment_reward, replay_rollout_func
from hitchhiker.training.replay_trainer import ReplayGRPOTrainer

T = 7  # completion width
# where a GPU is, the equivalence is checked on it too: TRL's Triton LM head, CUDA's attention
DEVICES = devices()


def _model(vocab: int, attn: str = "sdpa") -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, attn_implementation=attn,
    )  # fmt: skip
    return LlamaForCausalLM(cfg)


def _samples(vocab: int, lengths=(5, 9, 3), group=3, multi_turn=False, opening=()) -> pd.DataFrame:
    """Groups of different prompt lengths, completions of different lengths; in a multi-turn
    one, a stretch of environment tokens (model_mask 0) in the middle of some completions.
    Every prompt opens with ``opening`` (a chat model's system turn)."""
    g = torch.Generator().manual_seed(1)
    rows = []
    for s, p in enumerate(lengths):
        prompt = [*opening, *torch.randint(1, vocab, (p,), generator=g).tolist()]
        for k in range(group):
            n = 2 + (s + k) % (T - 1)
            mask = [1] * n
            if multi_turn and n >= 5:
                mask[2:4] = [0, 0]
            completion = torch.randint(1, vocab, (n,), generator=g).tolist()
            reward = float((s * 7 + k * 3) % 5) / 10
            rows.append(
                dict(group=f"s{s}", state_id=f"s{s}", sample_idx=k, prompt_ids=prompt, completion_ids=completion,
                     logprobs=(-2 - 6 * torch.rand(n, generator=g)).tolist(), model_mask=mask, reward=reward)
            )  # fmt: skip
    return pd.DataFrame(rows)


@contextlib.contextmanager
def _head(share: bool, device: str = "cpu"):
    """grpo_train's CPU LM head on the shared side only: the other side stays TRL's own (on a
    GPU both are TRL's, as in grpo_train)."""
    saved = trl.trainer.utils._use_triton, trl.trainer.utils._ChunkedLogProbFunction
    if share and device == "cpu":
        lm_head.use_on_cpu()
    try:
        yield
    finally:
        trl.trainer.utils._use_triton, trl.trainer.utils._ChunkedLogProbFunction = saved


def test_the_cpu_head_replaces_what_trl_still_calls():
    source = inspect.getsource(trl.trainer.utils.add_fused_lm_head)
    assert "compact = _use_triton(hidden_states.device)" in source
    assert "per_token = _ChunkedLogProbFunction.apply(" in source


@pytest.mark.parametrize("softcap, scale", [(None, 1.0), (30.0, 0.5)])
def test_the_cpu_head_gives_trls_logprobs_statistics_and_gradients(softcap, scale):
    from trl.kernels import ChunkedLogProbFunction
    from trl.kernels.chunked_logprob import OPTIONAL_OUTPUTS

    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(9, 16, generator=g, requires_grad=True)
    weight = torch.randn(50, 16, generator=g, requires_grad=True)
    targets = torch.randint(0, 50, (9,), generator=g)
    targets[:4] = (hidden @ weight.T)[:4].argmax(-1)  # four labels the top token, for is_top1
    outputs = ("log_probs", *OPTIONAL_OUTPUTS)  # all TRL computes: DPO's head asks for them all but one
    got = {}
    for name, head in (("ours", lm_head.PlainLogProbs), ("trl", ChunkedLogProbFunction)):
        logp, entropy, *stats = head.apply(hidden, weight, None, targets, 0.7, 32, softcap, scale, outputs)
        grads = torch.autograd.grad(logp.sum() + 0.3 * entropy.sum(), (hidden, weight))  # 32: two vocabulary tiles
        got[name] = (logp, entropy, *stats, *grads)
    assert got["ours"][4].sum() == 4  # is_top1
    for ours, trl_ in zip(got["ours"], got["trl"], strict=True):
        torch.testing.assert_close(ours, trl_, atol=1e-5, rtol=1e-5)


def _trainer(
    tok, samples, group, share, tmp_path, attn="sdpa", mode="token_truncate", checkpointing=False, device="cpu",
    **overrides,
):  # fmt: skip
    model = _model(len(tok), attn)
    args = dict(
        output_dir=str(tmp_path / f"t{share}"), per_device_train_batch_size=len(samples), num_generations=group,
        num_train_epochs=1, learning_rate=1.0, optim="sgd", temperature=0.7, max_completion_length=T, report_to=[],
        use_cpu=device == "cpu", bf16=False, logging_steps=1, save_strategy="no", seed=0, beta=0.04, loss_type="dapo",
        vllm_importance_sampling_correction=True, vllm_importance_sampling_mode=mode,
        vllm_importance_sampling_clip_max=2.0, disable_tqdm=True, gradient_checkpointing=checkpointing,
    )  # fmt: skip
    args = GRPOConfig(**args | overrides)
    torch.manual_seed(0)
    return ReplayGRPOTrainer(
        importance_sampling=True, share_prompt=share, model=model, reward_funcs=environment_reward, args=args,
        train_dataset=Dataset.from_dict({"prompt": sorted(samples.group.unique())}), processing_class=tok,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False),
        rollout_func=replay_rollout_func(samples, group),
    )  # fmt: skip


def _batch(samples: pd.DataFrame, pad: int, order=None):
    """TRL's layout: prompts left-padded, completions right-padded to T; rows in ``order``."""
    order = range(len(samples)) if order is None else order
    rows = [samples.iloc[i] for i in order]
    p_w = max(len(r.prompt_ids) for r in rows)
    ids = torch.full((len(rows), p_w + T), pad)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        p, c = list(r.prompt_ids), list(r.completion_ids)
        ids[i, p_w - len(p) : p_w], mask[i, p_w - len(p) : p_w] = torch.tensor(p), 1
        ids[i, p_w : p_w + len(c)], mask[i, p_w : p_w + len(c)] = torch.tensor(c), 1
    return ids, mask


def _logps_and_grads(trainer, ids, mask, batch_size=None):
    model = trainer.model
    model.zero_grad()
    ids, mask = ids.to(model.device), mask.to(model.device)
    with _head(trainer.share_prompt, model.device.type):
        logps, ent, _ = trainer._get_per_token_logps_and_entropies(
            model, ids, mask, T, batch_size=batch_size, compute_entropy=True
        )
    ((logps * mask[:, -T:]).sum() / 10).backward()
    grads = {n: p.grad.cpu() for n, p in model.named_parameters() if p.requires_grad}
    return logps.detach().cpu(), ent.detach().cpu(), grads


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("multi_turn, opening", [(False, ()), (True, ()), (False, (7, 3, 1)), (True, (7, 3, 1))])
def test_logprobs_and_lora_gradients_equal_the_unshared_ones(tok, tmp_path, attn, multi_turn, opening, device):
    # with an opening every prompt shares, it is computed once for the batch (and asserted so,
    # lest this pass by computing it in each packed row)
    samples = _samples(len(tok), multi_turn=multi_turn, opening=opening)
    order = torch.randperm(len(samples), generator=torch.Generator().manual_seed(3)).tolist()  # TRL shuffles
    ids, mask = _batch(samples, tok.pad_token_id, order)
    with openings() as opened:
        got = {
            share: _logps_and_grads(_trainer(tok, samples, 3, share, tmp_path, attn, device=device), ids, mask)
            for share in (1, 0)
        }
    assert opened == [len(opening)]
    m = mask[:, -T:].bool()
    (lp1, en1, g1), (lp0, en0, g0) = got[1], got[0]
    assert torch.allclose(lp1[m], lp0[m], atol=1e-5, rtol=0), (lp1[m] - lp0[m]).abs().max()
    assert torch.allclose(en1[m], en0[m], atol=1e-5, rtol=0)
    assert g1.keys() == g0.keys() and any("lora_A" in n for n in g1) and any("lora_B" in n for n in g1)
    for name in g1:
        rel = (g1[name] - g0[name]).norm() / g0[name].norm().clamp(min=1e-12)
        assert rel < 1e-4, (name, rel)


@pytest.mark.parametrize("opening", [(), (7, 3)])
def test_groups_of_one_and_chunks_smaller_than_the_batch(tok, tmp_path, opening):
    # B = 1 shares nothing but the opening and must still be exact; a batch_size chunks whole
    # groups, each chunk reading the one opening
    samples = _samples(len(tok), lengths=(4, 6, 2), group=1, opening=opening)
    samples = pd.concat(
        [samples, _samples(len(tok), lengths=(8,), group=3, opening=opening).assign(group="x", state_id="x")]
    )
    ids, mask = _batch(samples, tok.pad_token_id)
    trainer = _trainer(tok, samples, 3, True, tmp_path)  # TRL's minimum group; the batch below has groups of 1
    with openings() as opened:
        shared, _, _ = _logps_and_grads(trainer, ids, mask, batch_size=2)
    assert opened == [len(opening)]
    trainer.model.zero_grad()
    plain = super(type(trainer), trainer)._get_per_token_logps_and_entropies(trainer.model, ids, mask, T)[0]
    m = mask[:, -T:].bool()
    assert torch.allclose(shared[m], plain.detach()[m], atol=1e-5, rtol=0)


def test_the_packed_row_shares_each_prompt_once():
    ids = torch.tensor([[0, 5, 6, 7, 1, 2], [0, 5, 6, 7, 3, 0], [8, 9, 6, 7, 4, 4]])
    mask = torch.tensor([[0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    packed = shared_prompt.pack(ids, mask, 2)
    # group [5 6 7]: prefix 5 6, then blocks [7, 1] and [7] (row 1's completion is one token);
    # group [8 9 6 7]: prefix 8 9 6, block [7, 4]
    assert packed.input_ids.tolist() == [[5, 6, 7, 1, 7], [8, 9, 6, 7, 4]]
    assert packed.position_ids.tolist() == [[1, 2, 3, 4, 3], [0, 1, 2, 3, 4]]  # the unshared positions
    assert packed.shift_labels.tolist() == [[-100, -100, 1, 2, 3], [-100, -100, -100, 4, 4]]
    allowed = packed.attention_mask[0, 0]
    assert allowed[4].tolist() == [True, True, False, False, True]  # block 2 sees the prefix and itself
    assert allowed[3].tolist() == [True, True, True, True, False]
    # row 1's second column (padding in TRL's row, never scored) reads its block's first
    assert packed.index.tolist() == [[2, 3], [4, 4], [5 + 3, 5 + 4]]


def test_a_short_completion_takes_only_its_own_positions():
    # the blocks are as long as each completion, not the batch's longest: an answer word
    # beside a reason costs one position, and a completion with no token one
    ids = torch.tensor([[0, 5, 6, 1, 0, 0, 0], [0, 5, 6, 2, 3, 4, 9], [7, 5, 6, 0, 0, 0, 0]])
    mask = torch.tensor([[0, 1, 1, 1, 0, 0, 0], [0, 1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0, 0]])
    packed = shared_prompt.pack(ids, mask, 4)
    # group [5 6]: prefix 5, blocks [6] and [6, 2, 3, 4]; group [7 5 6]: prefix 7 5, block [6]
    assert packed.input_ids.tolist() == [[5, 6, 6, 2, 3, 4], [7, 5, 6, 0, 0, 0]]
    assert packed.shift_labels[0].tolist() == [-100, 1, 2, 3, 4, 9]
    assert packed.index.tolist() == [[1, 1, 1, 1], [2, 3, 4, 5], [8, 8, 8, 8]]
    assert packed.shift_labels[1].tolist() == [-100] * 6  # the empty completion's one position: unscored


def test_rows_padded_to_a_multiple_give_the_same_logprobs_and_gradients(tok, tmp_path, monkeypatch):
    # on CUDA the packed rows are padded to a multiple of 64 positions (cuDNN builds its
    # attention for each new shape); the padding attends only to itself and is never scored
    samples = _samples(len(tok), multi_turn=True)
    ids, mask = _batch(samples, tok.pad_token_id)
    monkeypatch.setattr(shared_prompt, "PAD_TO", {"cpu": 64})
    assert shared_prompt.pack(ids, mask, T).input_ids.shape[1] == 64
    padded = _logps_and_grads(_trainer(tok, samples, 3, True, tmp_path), ids, mask)
    monkeypatch.setattr(shared_prompt, "PAD_TO", {})
    assert shared_prompt.pack(ids, mask, T).input_ids.shape[1] < 64
    plain = _logps_and_grads(_trainer(tok, samples, 3, True, tmp_path), ids, mask)
    m = mask[:, -T:].bool()
    torch.testing.assert_close(padded[0][m], plain[0][m], atol=1e-6, rtol=0)
    for name, grad in plain[2].items():
        torch.testing.assert_close(padded[2][name], grad, atol=1e-6, rtol=1e-5)


def _count_no_grad_passes(trainer) -> list[int]:
    """A one-item list that counts the trainer's logprob forwards without gradient."""
    count, inner = [0], trainer._get_per_token_logps_and_entropies

    def counted(*args, **kwargs):
        count[0] += not torch.is_grad_enabled()
        return inner(*args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counted
    return count


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"])
def test_one_training_step_ends_at_the_same_weights(tok, tmp_path, mode, device):
    # shared: the importance ratio from the loss's own forward; unshared: TRL's separate pass
    samples = _samples(len(tok), multi_turn=True, opening=(7, 3, 1))
    weights, logs, passes = {}, {}, {}
    for share in (True, False):
        trainer = _trainer(tok, samples, 3, share, tmp_path, mode=mode, device=device)
        passes[share] = _count_no_grad_passes(trainer)
        with _head(share, device):
            trainer.train()
        weights[share] = {n: p.detach().cpu() for n, p in trainer.model.named_parameters() if p.requires_grad}
        logs[share] = trainer.state.log_history[0]
    start = {
        n: p.detach().cpu()
        for n, p in _trainer(tok, samples, 3, True, tmp_path, device=device).model.named_parameters()
        if p.requires_grad
    }
    for name, w in weights[True].items():  # SGD: a weight's change is its gradient, so this compares gradients too
        moved = (weights[False][name] - start[name]).norm()
        assert moved > 1e-6, name  # the step moved it ...
        assert (w - weights[False][name]).norm() < 1e-4 * moved, name  # ... to the same place
    # its one step: the KL reference's forward without gradient, and TRL's "old" one unshared only
    assert trainer.state.global_step == 1 and passes == {True: [1], False: [2]}
    for key in ("min", "mean", "max"):  # the same correction, logged the same
        got, want = (logs[s][f"sampling/importance_sampling_ratio/{key}"] for s in (True, False))
        assert got == pytest.approx(want, rel=1e-4, abs=1e-6), key
    assert logs[True]["sampling/sampling_logp_difference/mean"] == pytest.approx(
        logs[False]["sampling/sampling_logp_difference/mean"], rel=1e-4
    )
    if mode.endswith("truncate"):
        assert logs[True]["sampling/importance_sampling_ratio/max"] == pytest.approx(2.0)  # the cap was reached
        assert logs[True]["sampling/importance_sampling_ratio/capped_frac"] > 0


def test_gradient_checkpointing_recomputes_the_packed_rows_exactly(tok, tmp_path):
    # train.gradient_checkpointing: the checkpointed layers recompute the packed rows under
    # their 4D mask in the backward pass, and the step ends where the stored activations' does.
    # Their layers drop a cache in training, so there the packed rows compute the common
    # opening themselves.
    samples = _samples(len(tok), multi_turn=True, opening=(7, 3, 1))
    weights, opened = {}, {}
    for ckpt in (False, True):
        trainer = _trainer(tok, samples, 3, True, tmp_path / str(ckpt), checkpointing=ckpt)
        with _head(True), openings() as opened[ckpt]:
            trainer.train()
        assert trainer.model.base_model.model.is_gradient_checkpointing == ckpt
        weights[ckpt] = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    # (a pass in eval mode, TRL's reference one, keeps its cache and reads the opening there too)
    assert set(opened[False]) == {3} and 0 in opened[True]
    for name, w in weights[True].items():
        torch.testing.assert_close(w, weights[False][name], atol=1e-6, rtol=1e-5)


def _count_rows(trainer) -> list[int]:
    """A list that collects the rows of each logprob forward the trainer runs."""
    seen, inner = [], trainer._get_per_token_logps_and_entropies

    def counted(model, input_ids, *args, **kwargs):
        seen.append(len(input_ids))
        return inner(model, input_ids, *args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counted
    return seen


@pytest.mark.parametrize(
    "shape",
    [
        # one micro-batch: the equal group's rows leave it before the forward pass
        dict(per_device_train_batch_size=12, loss_type="dapo", optim="sgd", num_train_epochs=1),
        # a group a step, AdamW, two epochs: the equal group's steps take a zero gradient after
        # steps that gave Adam moments, and move the weights as TRL's pass does
        dict(per_device_train_batch_size=4, loss_type="grpo", optim="adamw_torch", num_train_epochs=2),
    ],
)
def test_completions_whose_advantage_is_zero_skip_the_pass_and_end_at_the_same_weights(tok, tmp_path, shape):
    samples = _samples(len(tok), group=4)
    samples.loc[samples.group == "s1", "reward"] = 0.2  # one group of four equal rewards: advantages exactly 0
    weights, rows = {}, {}
    for skip in (True, False):
        trainer = _trainer(tok, samples, 4, True, tmp_path / str(skip), beta=0.0, learning_rate=0.05, **shape)
        if not skip:
            trainer._zero_rows_add_nothing = lambda: False
        seen = _count_rows(trainer)
        with _head(True):
            trainer.train()
        weights[skip] = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
        rows[skip] = sum(seen)
    assert rows == {True: 8 * shape["num_train_epochs"], False: 12 * shape["num_train_epochs"]}
    start = _trainer(tok, samples, 4, True, tmp_path / "start").model
    moved = 0.0
    for name, p in start.named_parameters():
        if p.requires_grad:
            moved = max(moved, (weights[False][name] - p.detach()).abs().max().item())
            torch.testing.assert_close(weights[True][name], weights[False][name], atol=1e-6, rtol=1e-5)
    assert moved > 1e-3
