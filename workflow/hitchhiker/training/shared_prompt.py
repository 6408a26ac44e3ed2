"""Per-token logprobs of a GRPO batch with each group's prompt computed once.

TRL's GRPOTrainer scores a batch of N = G x B rows, each ``prompt + completion``: the B
rows of a group repeat the same prompt, so most of every forward and backward pass is
that prompt computed B times. Here each group becomes one packed row::

    [prompt[:-1]] [prompt[-1], c_1[:-1]] [prompt[-1], c_2[:-1]] ... [prompt[-1], c_B[:-1]]
     shared prefix   block 1                block 2                    block B

each block as long as its own completion (to its last attended token), not the batch's
longest: full_information's answer words are a token each beside reasons of up to 26
(weather_claims: 22% fewer positions in its round-1 batches than with blocks of one length)

with a 4D attention mask under which the prefix is causal and each block sees the prefix
and itself (causally), never another block, and position ids that give every token the
position it has in TRL's unshared row (left padding included). Block b's position j
predicts c_b[j] (TRL's fused LM head reads these as pre-shifted labels), so each row's
logprobs are those of the unshared computation, and the prefix's gradient is the sum of the
B completions' gradients, as autograd sums it through the shared activations. The same
idea as verl's prefix grouper (arXiv 2506.05433) and Unsloth's shared-prefix GRPO step,
written for our trainer: TRL 1.16 has no such option.

What every prompt of a batch opens with (a chat model's system turn, the environment's
instruction) is computed once for the batch (:func:`opening`): one row whose keys and values
every packed row reads from a cache, the prompts' own tokens placed after it.

Rows are grouped by identical prompt tokens (so TRL's shuffling inside a batch does not
matter); a group of one row is still exact, it just shares nothing. Multi-turn episodes
share the first prompt only: the environment's turns are part of each completion, attended
to as the completion mask says and kept out of the loss by TRL's env_mask as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

IGNORE = -100  # TRL's (and transformers') label for "not scored"
# packed rows are padded to a multiple of this many positions, by device type (and TRL's own
# step's batch, with share_prompt off: hitchhiker.training.objectives). CUDA's masked attention
# (cuDNN's on an H100) is built for each new shape: on an H100 each new packed width cost
# 2.3-2.9 s against a 0.1 s step (benchmarks/gpu's model). A CPU builds nothing.
PAD_TO = {"cuda": 64}


def packed_attention(model) -> str | None:
    """The model's attention implementation if it takes the 4D mask of packed rows ("sdpa" or
    "eager"); None for any other (flash attention takes no such mask): then nothing is shared."""
    attn = getattr(model.config, "_attn_implementation", None)
    return attn if attn in ("sdpa", "eager") else None


def keep_lora_inputs_in_bf16(model) -> None:
    """PEFT casts each LoRA layer's input to the adapter's dtype (float32 next to bf16 weights),
    and autocast casts it back to bf16 for the matmul: two copies of every activation, a tenth
    of a training step on the CPU. Under bf16 autocast the matmul is bf16 either way, so the
    values are the same without them (peft.helpers.disable_input_dtype_casting, made lasting)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    for module in model.modules():
        if isinstance(module, BaseTunerLayer):
            module.cast_input_dtype_enabled = False


@dataclass
class Packed:
    input_ids: torch.Tensor  # (G, L)
    attention_mask: torch.Tensor  # (G, 1, L, L) bool, True = may attend
    position_ids: torch.Tensor  # (G, L)
    shift_labels: torch.Tensor  # (G, L): the token each position predicts, IGNORE where none
    index: torch.Tensor  # (N, T): where each row's completion logprobs lie in the flattened (G * L)
    # (past a row's last attended token: its block's first position, never scored)


def left_padded(prompt_mask: torch.Tensor) -> bool:
    """True when every row's prompt tokens are one block at the right end (TRL left-pads)."""
    lengths = prompt_mask.sum(1, keepdim=True)
    cols = torch.arange(prompt_mask.shape[1], device=prompt_mask.device)
    return bool((prompt_mask.bool() == (cols >= prompt_mask.shape[1] - lengths)).all() and (lengths > 0).all())


def pack(input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_len: int) -> Packed:
    """One packed row per group of rows sharing a prompt (see the module docstring).

    ``input_ids`` and ``attention_mask`` are TRL's ``cat(prompt, completion)``, prompts left-
    padded, completions right-padded to ``completion_len``. Whole-tensor operations, no loop
    over rows: on CUDA each small copy of a loop is a kernel launch, on a CPU a dispatch.
    """
    n, width = input_ids.shape
    t, p_w = completion_len, width - completion_len
    dev = input_ids.device
    prompt, pmask = input_ids[:, :p_w], attention_mask[:, :p_w]
    comp, cmask = input_ids[:, p_w:], attention_mask[:, p_w:].bool()
    group_of, order, size = _group_of(prompt, pmask)
    first = torch.cumsum(size, 0) - size  # where each group starts in ``order``
    member = torch.empty(n, dtype=torch.long, device=dev)  # b: a row's place in its group
    member[order] = torch.arange(n, device=dev) - first[group_of[order]]
    lead = order[first]  # each group's first row, whose prompt the group shares
    prefix = pmask.sum(1)[lead] - 1  # the shared prefix: the prompt less its last token
    # row r's block: its completion to its last attended token (at least the prompt's last
    # token, which predicts the completion's first), after the blocks of its group's earlier rows
    cols_t = torch.arange(t, device=dev)
    length = torch.where(cmask, cols_t + 1, 0).amax(1).clamp(min=1)
    sorted_len = length[order]
    before = torch.cumsum(sorted_len, 0) - sorted_len
    offset = torch.empty_like(length)
    offset[order] = before - before[first][group_of[order]]
    blocks = torch.zeros(len(size), dtype=torch.long, device=dev).index_add_(0, group_of, length)
    multiple = PAD_TO.get(dev.type, 1)
    g, width_out = len(size), -(-int((prefix + blocks).max()) // multiple) * multiple

    # Group k's prefix: its column j < prefix[k] holds prompt column p_w - 1 - prefix[k] + j,
    # which is also the position the token has in TRL's unshared row.
    cols = torch.arange(width_out, device=dev)
    in_prefix = cols < prefix[:, None]  # (g, W)
    src = (p_w - 1 - prefix[:, None] + cols).clamp(0, p_w - 1)
    ids = torch.where(in_prefix, prompt[lead].gather(1, src), 0)  # padding: never attended to nor scored
    pos = torch.where(in_prefix, src, 0)
    labels = torch.full((g, width_out), IGNORE, dtype=input_ids.dtype, device=dev)
    valid = in_prefix.clone()  # a key anyone may attend to
    segment = torch.where(in_prefix, 0, -1)  # 0 prefix, b block b, -1 padding

    # Row r's block: the prompt's last token then the completion's first length - 1, predicting
    # the completion; its columns past its length (never scored) read the block's first.
    inside = cols_t < length[:, None]
    start = group_of * width_out + prefix[group_of] + offset
    index = start[:, None] + torch.where(inside, cols_t, 0)
    flat = index[inside]
    ids.view(-1)[flat] = torch.cat([prompt[:, -1:], comp[:, : t - 1]], 1)[inside]
    pos.view(-1)[flat] = (p_w - 1 + cols_t).expand(n, t)[inside]
    labels.view(-1)[flat] = comp.masked_fill(~cmask, IGNORE)[inside]
    valid.view(-1)[flat] = torch.cat([torch.ones_like(cmask[:, :1]), cmask[:, : t - 1]], 1)[inside]
    segment.view(-1)[flat] = (member + 1)[:, None].expand(n, t)[inside]
    q, kk = segment[:, :, None], segment[:, None, :]
    causal = torch.ones((width_out, width_out), dtype=torch.bool, device=dev).tril()
    mask = causal & valid[:, None, :] & ((kk == 0) | (kk == q))
    mask |= torch.eye(width_out, dtype=torch.bool, device=dev)  # padding attends to itself: no empty softmax row
    return Packed(ids, mask[:, None], pos, labels, index)


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The boolean mask as the additive float mask eager attention adds to its scores."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)


def _group_of(prompt: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's group (rows with the same prompt tokens), the rows ordered by group
    (ascending within each), and each group's size."""
    _, group_of = torch.unique(prompt.masked_fill(prompt_mask == 0, -1), dim=0, return_inverse=True)
    return group_of, torch.argsort(group_of, stable=True), torch.bincount(group_of)


def groups(prompt: torch.Tensor, prompt_mask: torch.Tensor) -> list[torch.Tensor]:
    """Row indices of each set of rows with the same prompt tokens."""
    _, order, size = _group_of(prompt, prompt_mask)
    return list(torch.split(order, size.tolist()))


def groups_in_chunks(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_len: int, batch_size: int
) -> list[torch.Tensor]:
    """Row indices in chunks of whole groups, each at most ``batch_size`` rows (or one group)."""
    p_w = input_ids.shape[1] - completion_len
    chunks, current = [], []
    for rows in groups(input_ids[:, :p_w], attention_mask[:, :p_w]):
        if current and len(current) + len(rows) > batch_size:
            chunks.append(current)
            current = []
        current = current + rows.tolist()
    chunks.append(current)
    return [torch.tensor(c, device=input_ids.device) for c in chunks]


def opening(model, heads: torch.Tensor) -> tuple[int, list | None]:
    """The tokens every row of ``heads`` opens with (each row a prompt's first tokens,
    unpadded, one fewer than the shortest prompt's: each prompt keeps at least its last),
    computed once, with gradients: their number and each layer's (keys, values), one row.
    0 and None where nothing is shared (one row, no common opening, or a model that keeps no
    cache: under gradient checkpointing transformers' layers drop it, in this pass and the
    rows'). A chat model's prompts all open with its system turn and the environment's
    instruction: SmolLM2's 41 of ~108 tokens, otherwise computed in every packed row."""
    k = int((heads == heads[:1]).all(0).cumprod(0).sum())  # the columns every row has as the first's
    if k == 0 or len(heads) < 2:
        return 0, None
    device = next(model.parameters()).device
    cache = model(input_ids=heads[:1, :k].to(device), use_cache=True, logits_to_keep=1).past_key_values
    if cache is None or cache.get_seq_length() != k:  # gradient checkpointing: each layer drops the cache
        return 0, None
    return k, [(layer.keys, layer.values) for layer in cache.layers]


def after_opening(opened: list, k: int, mask: torch.Tensor, positions: torch.Tensor, pad: torch.Tensor):
    """What packed rows whose prompts had their :func:`opening` of ``k`` tokens removed (as
    left padding) pass the model: the cache each reads the opening's keys and values from (a
    view per row, not a copy), their 4D ``mask`` with the opening's columns in front, and their
    ``positions`` less each row's left padding ``pad`` (the opening's included) plus ``k``:
    each token's place in its prompt unpadded (RoPE's scores depend only on the difference)."""
    from transformers import DynamicCache

    g = mask.shape[0]
    cache = DynamicCache(ddp_cache_data=[(a.expand(g, -1, -1, -1), b.expand(g, -1, -1, -1)) for a, b in opened])
    mask = torch.cat([mask.new_ones((g, 1, mask.shape[-2], k)), mask], -1)
    return cache, mask, (positions - pad[:, None] + k).clamp(min=0)


# the per-token fields of TRL's fused LM head output (trl.trainer.utils.FusedCausalLMOutput);
# a head computes those its add_fused_lm_head(outputs=...) names, the rest are None
FIELDS = ("log_probs", "entropy", "log_sum_sq_probs", "mean_logits", "is_top1")


def fused_fields(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_len: int, eager: bool,
    batch_size: int | None = None,
) -> dict[str, torch.Tensor]:  # fmt: skip
    """Each field of FIELDS the fused head computes, (N, T), at each completion token, the
    prompts shared; the rows in TRL's GRPO layout (:func:`pack`).

    ``model`` is TRL's model, whose forward takes ``fused_lm_head=True`` and pre-shifted
    ``shift_labels`` (trl.trainer.utils.add_fused_lm_head): temperature, logit scaling and the
    LM head's dtype are TRL's. Call it inside the accelerator's autocast, as TRL does.
    """
    t, p_w = completion_len, input_ids.shape[1] - completion_len
    got: dict[str, list[torch.Tensor]] = {}
    order = []
    dtype = next(model.parameters()).dtype if eager else None
    # the batch's common opening once (:func:`opening`), its tokens then left padding of each row
    pad = p_w - attention_mask[:, :p_w].sum(1)
    at = pad[:, None] + torch.arange(max(int((p_w - pad).min()) - 1, 0), device=input_ids.device)
    k, opened = opening(model, input_ids.gather(1, at))
    cols = torch.arange(input_ids.shape[1], device=input_ids.device)
    attention_mask = attention_mask.masked_fill((cols >= pad[:, None]) & (cols < pad[:, None] + k), 0)
    for rows in groups_in_chunks(input_ids, attention_mask, t, batch_size or input_ids.shape[0]):
        packed = pack(input_ids[rows], attention_mask[rows], t)
        mask, positions, cache = packed.attention_mask, packed.position_ids, None
        if opened is not None:
            lead = torch.zeros(len(mask), dtype=torch.long, device=mask.device)  # each packed row's first row
            lead[packed.index[:, 0] // mask.shape[-1]] = rows
            cache, mask, positions = after_opening(opened, k, mask, positions, pad[lead] + k)
        out = model(
            input_ids=packed.input_ids,
            attention_mask=additive(mask, dtype) if eager else mask,
            position_ids=positions,
            shift_labels=packed.shift_labels,
            fused_lm_head=True,
            past_key_values=cache,
        )
        for name in FIELDS:
            if getattr(out, name) is not None:
                got.setdefault(name, []).append(getattr(out, name).reshape(-1)[packed.index])
        order.append(rows)
    back = torch.argsort(torch.cat(order))  # chunk order -> row order
    return {name: torch.cat(parts)[back] for name, parts in got.items()}


def per_token_logps(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    completion_len: int,
    eager: bool,
    batch_size: int | None = None,
    compute_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(N, T) logprobs of each completion token (and entropies), the prompts shared (:func:`fused_fields`)."""
    out = fused_fields(model, input_ids, attention_mask, completion_len, eager, batch_size)
    return out["log_probs"], out["entropy"] if compute_entropy else None


def fused_output_flush_left(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor, eager: bool
):
    """TRL's fused-head output for rows as TRL's DPO collator lays them out, each row its
    prompt then its completion, flush left and right-padded, ``labels`` the completion's ids
    and IGNORE elsewhere: every per-token field (N, L - 1) where the unshared call puts it,
    zero (False) off the completions, as TRL's head leaves them. The rows are relaid in the
    GRPO layout (prompts left-padded, completions right-padded) and computed by
    :func:`fused_fields`, so the rows that share a prompt (a DPO pair's chosen and rejected
    answer) compute it once. None where a row is not so laid out (a truncated row, an empty
    prompt or no completion at all): the caller computes it unshared.
    """
    from trl.trainer.utils import FusedCausalLMOutput

    n, width = input_ids.shape
    dev = input_ids.device
    real, scored = attention_mask.bool(), labels != IGNORE
    plen, clen = (real & ~scored).sum(1), scored.sum(1)
    cols = torch.arange(width, device=dev)
    laid_out = cols < (plen + clen)[:, None]
    if not (torch.equal(real, laid_out) and torch.equal(scored, laid_out & (cols >= plen[:, None]))):
        return None
    if (plen == 0).any() or int(clen.max()) == 0:
        return None
    p_w, t = int(plen.max()), int(clen.max())
    at = torch.arange(p_w, device=dev) - (p_w - plen)[:, None]  # left-padded prompt column -> row column
    in_prompt = at >= 0
    within = torch.arange(t, device=dev) < clen[:, None]  # right-padded completion column j: row column plen + j
    comp_at = (plen[:, None] + torch.arange(t, device=dev)).clamp(max=width - 1)
    ids = torch.cat([torch.where(in_prompt, input_ids.gather(1, at.clamp(min=0)), 0),
                     torch.where(within, input_ids.gather(1, comp_at), 0)], 1)  # fmt: skip
    mask = torch.cat([in_prompt, within], 1).long()
    fields = fused_fields(model, ids, mask, t, eager)
    # completion token j of row i is predicted at position plen_i - 1 + j of TRL's shifted output
    row, col = torch.arange(n, device=dev)[:, None].expand(n, t), plen[:, None] - 1 + torch.arange(t, device=dev)
    where = (row[within], col[within])
    out = {name: v.new_zeros((n, width - 1)).index_put(where, v[within]) for name, v in fields.items()}
    return FusedCausalLMOutput(label_mask=scored[:, 1:], **out)
