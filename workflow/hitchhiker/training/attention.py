"""transformers' ``sdpa`` attention, but on the CPU with grouped keys and values.

SmolLM2 (like Llama 3, Qwen and Mistral) has fewer key/value heads than query heads (3 and 9).
transformers' sdpa attention copies each key/value head once per query head (``repeat_kv``)
before torch's scaled_dot_product_attention whenever there is an attention mask, which a
padded batch always has: torch's ``enable_gqa`` falls back to the slow math kernel on CUDA
with a mask (transformers' reason). The CPU's flash kernel takes grouped keys and values with
a mask, and gives the same output bit for bit (tests/test_attention.py).

The copies are most of the cost of attention when decoding. Under torch.profiler, the default
run's evaluate (SmolLM2 in float32, 64 states greedy and sampled, one AVX2 core) spent 7.5 s
of its 63 s of generation copying and 9.5 s attending; with grouped heads 0.8 s and 5.8 s, and
its generation took 52 s, the same 128 completions (benchmarks/rollout: 1.43x on 2 cores). A
decoding step's attention at SmolLM2's shapes (64 rows, 160 cached positions): 11.7 ms a
layer copied, 2.7 ms grouped. Training gains less: 10-20% of its attention's forward and
backward, whose key/value gradients differ from the copied ones' by float rounding.

:func:`use` registers :func:`sdpa` in place of transformers' own, through transformers'
AttentionInterface (its documented way to replace an attention function); models then keep
``_attn_implementation == "sdpa"`` and its masks. Anything but the CPU case above goes to
transformers' function unchanged.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward


def sdpa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    grouped = query.shape[1] != key.shape[1]
    theirs = kwargs.get("position_bias") is not None or kwargs.get("cache") is not None
    if not grouped or attention_mask is None or query.device.type != "cpu" or theirs:
        # without a mask transformers already passes enable_gqa; a position bias or a paged
        # cache is transformers' business
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    # with a mask transformers' own call is not causal (the mask is): the same call, grouped
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, enable_gqa=True
    )
    return out.transpose(1, 2).contiguous(), None


def use() -> None:
    """Every model this process loads with sdpa attention runs :func:`sdpa`."""
    AttentionInterface.register("sdpa", sdpa)
