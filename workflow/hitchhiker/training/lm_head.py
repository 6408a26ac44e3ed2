"""TRL's fused LM head, made fast on a CPU.

TRL's GRPOTrainer gets each completion token's logprob through a fused LM head
(trl.trainer.utils.add_fused_lm_head) built for GPUs: a Triton kernel folds vocabulary tiles
into an online log-sum-exp so that the (tokens x vocabulary) logits never exist at once. On a
device without Triton it does two things that cost a CPU dearly:

- it projects *every* position onto the vocabulary, labelled or not (so that a Neuron device
  does not recompile for each new count): in a shared-prompt row, the whole prompt;
- it runs the kernel's steps as separate float32 torch passes over each (tokens x 32768)
  tile, eight or so forward and as many backward.

Measured on SmolLM2-135M (bf16, 16 completions a step, prompts shared), these were half of a
training step. :func:`use_on_cpu` makes the head project only labelled positions and compute
their logprobs (and entropies) with one matmul and one log_softmax, differentiated by
autograd; on a CPU the (tokens x vocabulary) logits of the labelled positions fit easily.
DPO's statistics for its log (the mean logit, whether the label is the top token, and WPO's
log of the summed squared probabilities) come from the same logits. Same values within float
rounding (tests/test_shared_prompt.py compares every output against TRL's own).
"""

from __future__ import annotations

import torch


class PlainLogProbs:
    """Stands in for trl.kernels.ChunkedLogProbFunction (same ``apply`` arguments and results)."""

    @staticmethod
    def apply(hidden, weight, bias, targets, temperature, chunk_size, softcap=None, logit_scale=1.0, outputs=()):
        z = torch.nn.functional.linear(hidden, weight, bias).float() * logit_scale  # bf16 matmul under autocast
        if softcap is not None:
            z = softcap * torch.tanh(z / softcap)
        z = z / temperature
        logp = torch.log_softmax(z, dim=-1)
        entropy = -(logp.exp() * logp).sum(-1) if "entropy" in outputs else None
        with torch.no_grad():  # statistics for the log, as TRL's (non-differentiable there too)
            log_sum_sq_probs = torch.logsumexp(2 * logp, -1) if "log_sum_sq_probs" in outputs else None
            mean_logits = z.mean(-1) if "mean_logits" in outputs else None
            is_top1 = z.argmax(-1) == targets if "is_top1" in outputs else None  # the first maximum, as TRL's
        return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1), entropy, log_sum_sq_probs, mean_logits, is_top1


def use_on_cpu() -> None:
    """Patch TRL's fused head for this process: labelled positions only, one log_softmax."""
    import trl.trainer.utils as trl_utils

    # the only use of this name in trl.trainer.utils is the compact-or-not choice; the kernel
    # module keeps its own binding
    trl_utils._use_triton = lambda device: True
    trl_utils._ChunkedLogProbFunction = PlainLogProbs
