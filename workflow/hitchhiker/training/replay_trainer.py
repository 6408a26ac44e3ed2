"""ReplayGRPOTrainer: TRL's GRPOTrainer trained on stored samples, in fewer FLOPs.

TRL owns the objective (loss variants, clipping, KL, env_mask, LoRA, DeepSpeed). This
subclass changes three things:

- **Off-policy correction for replayed samples.** The samples were drawn by the policy of an
  earlier round, at a per-state temperature, while TRL scores them with the policy being
  trained at rollout.temperature. TRL corrects for exactly this (ratio pi_theta / mu per token
  from the logprobs a rollout_func returns, truncated or masked at a cap, logged as
  sampling/importance_sampling_ratio/*), but only when use_vllm is set, its one source of
  off-policy samples. So the flag is raised after construction (no vLLM engine is built) and
  lowered around _generate, whose only use of it with a rollout_func is syncing weights into
  that engine. The fraction of tokens whose ratio reached the cap is added to the log.
- **The fast step (train.share_prompt, on by default).** Every per-token logprob TRL computes
  (the loss's, the KL reference's) goes through _get_per_token_logps_and_entropies, where each
  group's prompt is computed once (hitchhiker.training.shared_prompt). And TRL's separate no-grad
  forward pass for the ratio's pi_theta is skipped: each generation batch is trained once,
  inside one optimizer step (TRL's own condition for "old == current"), so pi_theta is the
  loss forward's own logprobs, detached, and the ratio is computed from them there, with
  TRL's modes and metric names. Off, the step is TRL's own, row by row, with its extra pass.

- **No pass for what cannot move the weights.** With beta 0 and no entropy or auxiliary term,
  a completion whose advantage is exactly 0 (every completion of a group whose rewards are
  equal, at B = 2 or 4; at B = 3 or 8 the group mean's rounding leaves about 1e-5, and TRL
  trains those) adds exactly 0 to the loss and its gradient. Under the loss types whose
  normaliser spans the generation batch (dapo, cispo) such rows leave the micro-batch before
  the forward pass; a micro-batch with no other row (any loss type) returns a zero loss whose
  gradient is exactly 0 for every trainable weight, so the optimizer steps as after TRL's own
  pass (Adam's moments included). TRL logs those rows' entropy and clip ratios; this does not.

- **Resumable order.** TRL's sampler seeds its generator once, when it is built, and draws a
  new order at every pass; a run resumed from a checkpoint builds a new sampler, whose next
  epoch would repeat the first epoch's order, ending at other weights than an uninterrupted
  run. ResumableRepeatSampler gives each epoch the order an uninterrupted run gives it.

tests/test_shared_prompt.py checks that both steps give the same logprobs, gradients and
weights, and fails if TRL stops routing through the methods overridden here;
tests/test_grpo_train.py resumes from inside an epoch, at its end and inside the next.

Import it after grpo_train._skip_trl_vllm_import (it imports TRL's trainer).
"""

from __future__ import annotations

import torch
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from hitchhiker.training import shared_prompt


class ResumableRepeatSampler(RepeatSampler):
    """TRL's RepeatSampler, whose order in epoch e does not depend on how the run got there.

    transformers calls set_epoch before each epoch, also in a resumed run (whose RNG state it
    restores, but not this sampler's own generator). The generator is reseeded and the e
    earlier epochs' orders drawn again, so an uninterrupted run's orders stay as TRL draws them;
    seeding with seed + epoch, as torch's DistributedSampler does, would be shorter but would
    change every multi-epoch run's results (the default run trains two epochs)."""

    def set_epoch(self, epoch: int) -> None:
        if self.shuffle:
            self.generator.manual_seed(self.seed)
            for _ in range(epoch):
                torch.randperm(self.num_samples, generator=self.generator)


class ReplayGRPOTrainer(GRPOTrainer):
    def __init__(self, *args, importance_sampling: bool, share_prompt: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.importance_sampling = importance_sampling
        self.share_prompt = share_prompt
        self.use_vllm = importance_sampling
        self._ratio_for = None  # the inputs whose importance ratio the next forward with grad computes
        if share_prompt and self.args.bf16:
            shared_prompt.keep_lora_inputs_in_bf16(self.model)

    def _get_train_sampler(self, dataset=None):
        trl = super()._get_train_sampler(dataset)
        return ResumableRepeatSampler(
            trl.data_source, trl.mini_repeat_count, trl.batch_size, trl.repeat_count, trl.shuffle, trl.seed
        )

    def _ratio_from_loss_forward(self) -> bool:
        generate_every = self.args.steps_per_generation * self.num_iterations
        return (
            self.importance_sampling
            and self.share_prompt
            and self.args.gradient_accumulation_steps % generate_every == 0
        )

    def _generate(self, prompts):
        # restores the flag as it was: inside _generate_and_score_completions it is lowered
        # still, or TRL would run its "old" forward after all
        use_vllm, self.use_vllm = self.use_vllm, False
        try:
            return super()._generate(prompts)
        finally:
            self.use_vllm = use_vllm

    def _generate_and_score_completions(self, inputs):
        if not self._ratio_from_loss_forward():
            out = super()._generate_and_score_completions(inputs)
            if self.importance_sampling:
                mask = out["completion_mask"] * out.get("tool_mask", 1)
                self._log_capped(out["importance_sampling_ratio"] >= self.vllm_importance_sampling_clip_max, mask)
            return out
        self.use_vllm = False  # TRL then runs neither its "old" forward nor the ratio: _compute_loss does
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self.use_vllm = self.importance_sampling

    # the per-row tensors of a text-only micro-batch; any other key keeps every row
    ROWS = frozenset(
        ["prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages", "old_per_token_logps",
         "importance_sampling_ratio", "sampling_per_token_logps", "ref_per_token_logps", "tool_mask"]
    )  # fmt: skip

    def _zero_rows_add_nothing(self) -> bool:
        return self.beta == 0.0 and not self._entropy_bonus_enabled and not self.aux_loss_enabled

    def _compute_loss(self, model, inputs):
        if self._zero_rows_add_nothing() and inputs["advantages"].dim() == 1:
            moving = inputs["advantages"] != 0
            if not moving.any() and self.accelerator.num_processes == 1 and not self.is_deepspeed_enabled:
                # exactly 0 for every trainable weight: Adam's moments and step count move as
                # after TRL's pass. (Under DDP or DeepSpeed the ranks' passes must match.)
                return sum(p.sum() for p in model.parameters() if p.requires_grad) * 0.0
            rows_apart = self.loss_type in ("dapo", "cispo") and self.top_entropy_quantile == 1.0
            if rows_apart and moving.any() and not moving.all() and set(inputs) <= self.ROWS | {"num_items_in_batch"}:
                inputs = {k: v[moving] if k in self.ROWS and v is not None else v for k, v in inputs.items()}
        if self._ratio_from_loss_forward():
            self._ratio_for = inputs
        return super()._compute_loss(model, inputs)

    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
        compute_aux_loss=False, **extra,
    ):  # fmt: skip
        attn = shared_prompt.packed_attention(self.model)
        prompt_mask = attention_mask[:, : input_ids.shape[1] - logits_to_keep]
        if (
            not self.share_prompt
            or compute_aux_loss
            or any(v is not None for v in extra.values())
            or attn is None
            or not shared_prompt.left_padded(prompt_mask)
        ):
            logps, entropies, aux = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy,
                compute_aux_loss, **extra,
            )  # fmt: skip
        else:
            with self.accelerator.autocast():
                logps, entropies = shared_prompt.per_token_logps(
                    model, input_ids, attention_mask, logits_to_keep, attn == "eager", batch_size, compute_entropy
                )
            aux = None
        if self._ratio_for is not None and torch.is_grad_enabled():
            inputs, self._ratio_for = self._ratio_for, None
            inputs["importance_sampling_ratio"] = self._importance_ratio(logps.detach(), inputs)
        return logps, entropies, aux

    def _importance_ratio(self, logps: torch.Tensor, inputs: dict) -> torch.Tensor:
        """TRL's vLLM importance-sampling ratio (grpo_trainer._generate_and_score_completions),
        pi_theta from this forward, mu the stored behaviour logprobs, and its metrics."""
        mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
        diff = torch.nan_to_num((logps - inputs["sampling_per_token_logps"]) * mask, nan=0.0)
        mode = self.vllm_importance_sampling_mode
        sequence = mode.startswith("sequence")
        raw = torch.exp(diff.sum(-1, keepdim=True) if sequence else diff)
        lo, hi = self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max
        if mode.endswith("truncate"):
            ratio = torch.clamp(raw, min=lo, max=hi)
        else:
            ratio = raw.masked_fill((raw < (lo if lo is not None else -torch.inf)) | (raw > hi), 0.0)

        m = self._metrics["train" if self.model.training else "eval"]
        gather = self.accelerator.gather
        on = mask.bool()
        delta = (logps - inputs["sampling_per_token_logps"]).abs()[on]
        delta = delta[~torch.isnan(delta)]
        zero = torch.zeros((), device=logps.device)
        m["sampling/sampling_logp_difference/mean"].append(
            gather(delta.mean() if delta.numel() else zero).mean().item()
        )
        m["sampling/sampling_logp_difference/max"].append(gather(delta.max() if delta.numel() else zero).max().item())
        flat = ratio.flatten() if sequence else ratio[on]
        for name, f, pool in (
            ("min", torch.min, torch.min),
            ("mean", torch.mean, torch.mean),
            ("max", torch.max, torch.max),
        ):
            m[f"sampling/importance_sampling_ratio/{name}"].append(
                pool(gather(f(flat) if flat.numel() else zero)).item()
            )
        self._log_capped(raw >= hi, mask if not sequence else torch.ones_like(raw))
        return ratio

    def _log_capped(self, hit: torch.Tensor, mask: torch.Tensor) -> None:
        """The fraction of tokens (sequences, in the sequence modes) whose ratio reached the cap."""
        hit = hit[mask.bool()] if hit.shape == mask.shape else hit.flatten()
        frac = hit.float().mean() if hit.numel() else torch.zeros((), device=hit.device)
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["sampling/importance_sampling_ratio/capped_frac"].append(
            self.accelerator.gather(frac).mean().item()
        )
