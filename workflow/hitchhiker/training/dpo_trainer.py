"""TokenizedDPOTrainer: TRL's DPOTrainer on the buffer's token ids, each pair's prompt computed once.

TRL owns the objective (its loss types, the reference, the metrics). This subclass changes
two things:

- **Token ids in, no tokenizer.** The pairs are the sampled token ids already
  (hitchhiker.training.objectives.rows.dpo_pairs), which TRL would take for text to tokenize.
- **The shared prompt (train.share_prompt, on by default).** TRL's collator lays each pair
  out as two rows, prompt + chosen and prompt + rejected, so every forward and backward pass
  computes each prompt twice: at the default shapes (a ~138-token prompt, answers of at most
  24 tokens) 2 x 162 positions where 138 + 2 x 24 carry the information. Both of TRL's model
  calls (the loss's, with gradient, and the reference logprobs' that it precomputes) go
  through :class:`SharedPrompt`, which relays the rows so that the rows with the same
  prompt attend to one copy of it (hitchhiker.training.shared_prompt) and hands TRL its fused head's
  output where the unshared call puts it. Off, the step is TRL's own.

tests/test_dpo_trainer.py checks that both give the same logprobs, statistics and weights,
and fails if TRL stops calling the model it is given.
"""

from __future__ import annotations

from trl import DPOTrainer

from hitchhiker.training import shared_prompt


class SharedPrompt:
    """Calls ``model`` as TRL's DPOTrainer does, each prompt computed once (see the module
    docstring); any other call, or rows not laid out as TRL's collator lays them, unchanged."""

    def __init__(self, model, eager: bool):
        self.model, self.eager = model, eager

    def __call__(self, input_ids=None, attention_mask=None, labels=None, fused_lm_head=False, **rest):
        if fused_lm_head and set(rest) <= {"use_cache"} and labels is not None:
            out = shared_prompt.fused_output_flush_left(self.model, input_ids, attention_mask, labels, self.eager)
            if out is not None:
                return out
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=fused_lm_head, **rest
        )


class TokenizedDPOTrainer(DPOTrainer):
    def __init__(self, *args, share_prompt: bool, **kwargs):
        self.share_prompt = share_prompt  # first: TRL's __init__ precomputes the reference logprobs
        super().__init__(*args, **kwargs)
        if share_prompt and self.args.bf16:
            shared_prompt.keep_lora_inputs_in_bf16(self.model)

    def _prepare_dataset(self, dataset, *args, **kwargs):
        return dataset

    def _shared(self, model):
        attn = shared_prompt.packed_attention(self.model)
        return SharedPrompt(model, attn == "eager") if self.share_prompt and attn is not None else model

    def compute_ref_log_probs(self, model, inputs):
        return super().compute_ref_log_probs(self._shared(model), inputs)

    def _compute_loss(self, model, inputs, return_outputs):
        return super()._compute_loss(self._shared(model), inputs, return_outputs)
