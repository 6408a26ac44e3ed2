"""train.objective full_information: the first answer word trained towards the action the
market paid best, with the reward of every action, not only of those the policy sampled.

A market knows what every answer would have earned (Environment.action_rewards): each
ticker's forward return is in the outcomes table. For each state, the policy's distribution
over its actions is its probability of each action's answer text as the completion's first
tokens, pi(a_k | prompt). The loss is the cross-entropy of the best action, weighted by what
the best action earned over the mean of all actions (what a uniform pick would have left),
normalised over the batch:

    L = sum_s w_s * -log pi(best_s | prompt_s) / sum_s w_s,      w_s = r_best,s - mean_k r_k,s

The probability is among everything the model could write, not renormalised over the
actions: renormalised, the loss can be lowered by moving every action's probability onto
text that is no answer at all, and was (benchmarks/objectives, tiny model: the sampled valid
rate fell 6 points in one round); this way the best action gains at the expense of all else.
A state where every action pays the same weighs nothing, and the learning rate does not
depend on the scale of the returns. Cross-entropy rather than the expected reward
sum_k pi_k r_k: the expected reward's gradient on an action is pi_k (r_k - mean_pi r), which
vanishes where the policy is sure of one action, as SmolLM2 is of "A" (its greedy answer to
every pairwise state); the cross-entropy's is largest there.

What it leaves untrained: every token after the first answer word (the rationale, the end of
the answer) gets no gradient of its own; it moves only as far as the shared weights carry it.
With train.full_information.rationale = best_answers, the best_answers loss (hitchhiker/
objectives/rows.py: each group's best sample above its mean, the model's tokens; with
rollout.each_answer, every reason after its answer word weighed by what the grounding terms
paid or charged it) is added to the action's, so the rationale learns from the samples that
earned the most and, with each_answer, away from those whose claims do not hold.
A trained reason moves the weights the answer word shares, and so the decision: with
train.full_information.decision_anchor, from round 2 on, the loss adds that many times the
mean KL divergence of each state's actions' distribution (renormalised over them) from the
round's starting policy's, KL(start || pi), holding the decision the last round learned.
No sampled completion is read, so no behaviour policy needs correcting (no importance
sampling), and the only reference is the round's starting policy (the anchor, and the floor
of a reason pushed down). TRL has no such objective: this is
a transformers Trainer with its own compute_loss, so checkpoints, resumption, LoRA,
accelerate and DeepSpeed are the Trainer's.

With share_prompt (train.share_prompt, on by default) each state's prompt is computed once
and its K actions (and, with the rationale trained, its best samples) attend to it
(hitchhiker.training.shared_prompt's packing), and the tokens every prompt of the batch opens
with (the chat template's system turn, the instruction's first line: 41 of smollm2_signal's
~108) are computed once for the whole batch, their keys and values read by every packed row;
off, each (state, action) and each best sample is its own row. Either way the LM head runs at
the completions' positions only.
"""

from __future__ import annotations

import contextlib
import math

import torch
from transformers import Trainer

from hitchhiker.training import shared_prompt

# a reason pushed down (rows.answer_reasons: its claims charged) is pushed until each of its
# tokens is this much less likely than under the round's starting policy, and no further
# (PPO's clip for a negative advantage, TRL's GRPO's epsilon): unbounded, the push took
# SmolLM2 to whatever the pushed-down tokens left ("because because because ...", be077b6)
PUSHED_DOWN_CLIP = 0.35


def _rows(batch: list[dict], device, best: bool, skip: int = 0) -> tuple[torch.Tensor, ...]:
    """Every (state, action) as a row: prompt (less its first ``skip`` tokens) left-padded,
    action right-padded (TRL's layout);
    with ``best``, then each of the state's samples the rationale trains (objectives.rows.action_rows'
    best_ids), its completion labelled on the tokens its best_mask marks. Returns input_ids,
    attention_mask, the labels (IGNORE past each completion's end and off the model's
    tokens), each label's floor (:data:`PUSHED_DOWN_CLIP` below its reference logprob where
    the row has ``best_ref``, else -inf) and each row's state."""
    rows = [(x["prompt_ids"][skip:], a, a, None, s) for s, x in enumerate(batch) for a in x["action_ids"]]
    for s, x in enumerate(batch if best else []):
        p = len(x["prompt_ids"])
        refs = x.get("best_ref") or [None] * len(x["best_ids"])
        for full, mask, ref in zip(x["best_ids"], x["best_mask"], refs, strict=True):  # the prompt, a completion
            c, trained = full[p:], mask[p:]
            lab = [i if m else shared_prompt.IGNORE for i, m in zip(c, trained, strict=True)]
            rows.append((x["prompt_ids"][skip:], c, lab, ref or None, s))
    p_w, t = max(len(p) for p, *_ in rows), max(len(c) for _, c, *_ in rows)
    ids = torch.zeros((len(rows), p_w + t), dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full((len(rows), t), shared_prompt.IGNORE, dtype=torch.long)
    floor = torch.full((len(rows), t), -math.inf)
    for i, (p, c, lab, ref, _) in enumerate(rows):
        ids[i, p_w - len(p) : p_w], mask[i, p_w - len(p) : p_w + len(c)] = torch.tensor(p), 1
        ids[i, p_w : p_w + len(c)], labels[i, : len(c)] = torch.tensor(c), torch.tensor(lab)
        if ref is not None:
            floor[i, : len(c)] = torch.tensor(ref) + math.log(1 - PUSHED_DOWN_CLIP)
    return ids.to(device), mask.to(device), labels.to(device), floor.to(device), [s for *_, s in rows]


def _forward(model, ids, mask, position_ids, columns: torch.Tensor, eager: bool, cache=None) -> torch.Tensor:
    if eager and mask.dim() == 4:
        mask = shared_prompt.additive(mask, next(model.parameters()).dtype)
    # the LM head at these columns only: as a tensor, transformers gathers them into a
    # contiguous (rows x columns x hidden) block; as a count it slices the last columns, and
    # torch multiplies a sliced (not contiguous) block by the head through a batched copy of
    # its whole weight, per row, forward and backward (80% of the rationale's step)
    out = model(
        input_ids=ids, attention_mask=mask, position_ids=position_ids, logits_to_keep=columns, past_key_values=cache
    )
    return torch.log_softmax(out.logits.float(), dim=-1)


def _opening(model, batch: list[dict]) -> tuple[int, list | None]:
    """The tokens every prompt of ``batch`` opens with, computed once (shared_prompt.opening)."""
    m = min(len(x["prompt_ids"]) for x in batch) - 1
    return shared_prompt.opening(model, torch.tensor([list(x["prompt_ids"][:m]) for x in batch], dtype=torch.long))


def action_logps(
    model, batch: list[dict], share_prompt: bool, eager: bool, best: bool = False, per_token: bool = False
) -> tuple[torch.Tensor, list[int]]:
    """log pi(action | prompt) of every (state, action) row of ``batch`` (rows of
    objectives.rows.action_rows), and each row's state; with ``best``, then the log-likelihood of
    each best sample's model tokens (:func:`_rows`), its prompt shared with its actions'. A
    token whose logprob is below its floor (a reason pushed down, once it is
    :data:`PUSHED_DOWN_CLIP` less likely than under the round's starting policy) counts
    without a gradient. With ``per_token``, each row's logprob at each completion position
    (0 off its labels) rather than their sum."""
    device = next(model.parameters()).device
    k, opened = _opening(model, batch) if share_prompt else (0, None)
    ids, mask, labels, floor, owner = _rows(batch, device, best, k)
    t = labels.shape[1]
    if not share_prompt:
        # position p_w - 1 + j predicts the completion's token j
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        p_w = ids.shape[1] - t
        logp = _forward(model, ids, mask, positions, torch.arange(p_w - 1, p_w - 1 + t, device=ids.device), eager)
        taken = logp.gather(2, labels.clamp(min=0)[..., None])[..., 0]
        return _total(taken, labels != shared_prompt.IGNORE, floor, per_token), owner
    packed = shared_prompt.pack(ids, mask, t)
    g, width = packed.input_ids.shape
    row_of, pos = packed.index // width, packed.index % width
    # move each packed row's padding to its front, so that every row's blocks end at the last
    # column and the rows' scored positions fall in few columns, where the LM head runs
    end = torch.zeros(g, dtype=torch.long, device=ids.device).scatter_reduce(
        0, row_of.flatten(), pos.flatten() + 1, "amax"
    )
    shift = width - end
    roll = lambda x, s, dims: torch.roll(x, shifts=(s,) * len(dims), dims=dims)  # noqa: E731
    inputs = [
        torch.stack([roll(x[k], int(shift[k]), dims) for k in range(g)])
        for x, dims in (
            (packed.input_ids, (0,)),
            (packed.position_ids, (0,)),
            (packed.attention_mask, (-2, -1)),
        )
    ]
    pos = pos + shift[row_of]
    scored = labels != shared_prompt.IGNORE
    columns = torch.unique(pos[scored])  # the positions that predict a label, in any row
    at = torch.zeros(width, dtype=torch.long, device=ids.device)
    at[columns] = torch.arange(len(columns), device=ids.device)
    cache = None
    if opened is not None:
        pad = (ids.shape[1] - t) - mask[:, : ids.shape[1] - t].sum(1)  # each row's
        pad = torch.zeros(g, dtype=torch.long, device=ids.device).scatter(0, row_of[:, 0], pad)
        cache, inputs[2], inputs[1] = shared_prompt.after_opening(opened, k, inputs[2], inputs[1], pad)
    logp = _forward(model, inputs[0], inputs[2], inputs[1], columns, eager, cache)
    taken = logp[row_of, at[pos], labels.clamp(min=0)]
    return _total(taken, scored, floor, per_token), owner


def _total(taken: torch.Tensor, scored: torch.Tensor, floor: torch.Tensor, per_token: bool) -> torch.Tensor:
    # PPO's clip for a negative advantage (TRL's GRPO's epsilon): below its floor a token's
    # logprob is a constant, so pushing it down stops there
    taken = torch.where(taken < floor, taken.detach(), taken) * scored
    return taken if per_token else taken.sum(1)


@contextlib.contextmanager
def _as_trained(model, bf16: bool):
    """A pass without gradients (in eval mode) computed as the trainer's steps compute it: in
    bf16 training, under the same bf16 autocast, LoRA's inputs left in bf16 (as the trainers
    leave them). Outside autocast PEFT's LoRA layers cast each input to float32 and multiply
    in float32: SmolLM2's reference pass of signal_claims' first round took 84 s of its 403 on
    2 cores, and 18.6 s against 8.1 s on 160 of its rows, bit for bit the same logprobs (a
    round's adapter starts at zero, so only the base weights' bf16 path counts)."""
    if bf16:
        shared_prompt.keep_lora_inputs_in_bf16(model)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device.type
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
        yield
    model.train(was_training)


def reference_logps(
    model, table: list[dict], share_prompt: bool, eager: bool, batch_size: int, bf16: bool = False
) -> list[list]:
    """For each row of ``table`` (objectives.rows.action_rows'), each best sample's logprob at
    each completion position under ``model`` as it is now (the round's starting policy), for
    the samples pushed down (weight < 0), an empty list for the others: the floors
    :func:`action_logps` stops pushing them at. ``bf16``: training runs in bf16 (:func:`_as_trained`)."""
    out: list[list] = [[[] for _ in x["best_ids"]] for x in table]
    todo = [i for i, x in enumerate(table) if any(w < 0 for w in x["best_weight"])]
    with _as_trained(model, bf16):
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            batch = [table[i] for i in chunk]
            taken, _ = action_logps(model, batch, share_prompt, eager, best=True, per_token=True)
            k = sum(len(table[i]["action_ids"]) for i in chunk)
            j = 0
            for i in chunk:
                p = len(table[i]["prompt_ids"])
                for n, (full, w) in enumerate(zip(table[i]["best_ids"], table[i]["best_weight"], strict=True)):
                    if w < 0:
                        out[i][n] = taken[k + j, : len(full) - p].tolist()
                    j += 1
    return out


def action_reference(
    model, table: list[dict], share_prompt: bool, eager: bool, batch_size: int, bf16: bool = False
) -> list[list]:
    """For each row of ``table``, log pi(action | prompt) of each of its actions under
    ``model`` as it is now (the round's starting policy): what train.full_information.
    decision_anchor holds the answer word to. ``bf16`` as :func:`reference_logps`'."""
    out: list[list] = []
    with _as_trained(model, bf16):
        for start in range(0, len(table), batch_size):
            logps, _ = action_logps(model, table[start : start + batch_size], share_prompt, eager)
            out.extend(logps.split([len(x["action_ids"]) for x in table[start : start + batch_size]]))
    return [x.tolist() for x in out]


def loss_and_stats(
    logps: torch.Tensor, owner: list[int], rewards: list[list[float]], refs: list[list[float]] | None = None
) -> tuple[torch.Tensor, dict]:
    """The weighted cross-entropy of the module docstring, and what it saw: the mean
    probability of the best action among the actions (renormalised over them) and the share
    of states whose most probable action is the best. With ``refs`` (each state's actions'
    logprobs under the round's starting policy), also the states' mean KL divergence of the
    actions' distribution from the starting policy's, KL(ref || pi), renormalised over the
    actions, as the second term returned (stats' decision_kl)."""
    owner_t = torch.tensor(owner, device=logps.device)
    terms, weights, p_best, picks, kls = [], [], [], [], []
    for s, r in enumerate(rewards):
        log_q = torch.log_softmax(logps[owner_t == s], dim=0)
        if refs is not None:
            log_ref = torch.log_softmax(torch.tensor(refs[s], dtype=log_q.dtype, device=log_q.device), dim=0)
            kls.append((log_ref.exp() * (log_ref - log_q)).sum())
        r = torch.tensor(r, dtype=log_q.dtype, device=log_q.device)
        best = int(torch.argmax(r))  # the first among equals
        weights.append(r[best] - r.mean())
        terms.append(-logps[owner_t == s][best])
        p_best.append(log_q[best].detach().exp())
        picks.append(float(int(torch.argmax(log_q.detach())) == best))
    w = torch.stack(weights)
    loss = (w * torch.stack(terms)).sum() / w.sum().clamp(min=torch.finfo(w.dtype).tiny)
    stats = {"p_best": float(torch.stack(p_best).mean()), "picks_best": sum(picks) / len(picks)}
    kl = torch.stack(kls).mean() if kls else loss.new_zeros(())
    if kls:
        stats["decision_kl"] = float(kl.detach())
    return loss, kl, stats


class FullInformationTrainer(Trainer):
    """A transformers Trainer whose loss is :func:`loss_and_stats` on rows of
    objectives.rows.action_rows (plus, with rationale best_answers, best_answers' loss on the best
    samples, computed in the same pass, each state's prompt once for its actions and its best sample);
    logs full_information/p_best, full_information/picks_best (and best_answers_loss), means
    over the steps since the last log."""

    def __init__(
        self,
        *args,
        share_prompt: bool,
        rationale: str = "untrained",
        decision_anchor: float = 0.0,
        decision: bool = True,
        **kwargs,
    ):
        super().__init__(*args, data_collator=lambda rows: {"rows": rows}, **kwargs)
        self.share_prompt = share_prompt
        if share_prompt and self.args.bf16:  # as the GRPO and DPO steps
            shared_prompt.keep_lora_inputs_in_bf16(self.model)
        self.rationale = rationale
        self.decision_anchor = decision_anchor
        self.decision = decision  # False: the answer word's cross-entropy is left out (decision_rounds)
        self._seen: list[dict] = []

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        rows = inputs["rows"]
        attn = shared_prompt.packed_attention(self.model)
        share = self.share_prompt and attn is not None
        rationale = self.rationale == "best_answers" and any(x["best_ids"] for x in rows)
        logps, owner = action_logps(model, rows, share, attn == "eager", best=rationale)
        k = sum(len(x["action_ids"]) for x in rows)  # the actions' rows, then the best samples'
        refs = [x["action_ref"] for x in rows] if self.decision_anchor else None
        loss, kl, stats = loss_and_stats(logps[:k], owner[:k], [x["rewards"] for x in rows], refs)
        loss = (loss if self.decision else 0.0 * loss) + self.decision_anchor * kl
        if rationale:
            # best_answers' loss (SFTTrainer's completion-only loss): the negative
            # log-likelihood of every trained token of the batch's samples, each sample's
            # times its weight (1, or with rollout.each_answer what the grounding terms paid or
            # charged its reason, in units of the reason bonus: rows.answer_reasons), over the
            # number of trained tokens
            weight = torch.tensor([w for x in rows for w in x["best_weight"]], dtype=logps.dtype, device=logps.device)
            sft = -(weight * logps[k:]).sum() / sum(sum(m) for x in rows for m in x["best_mask"])
            loss = loss + sft
            stats["best_answers_loss"] = float(sft.detach())
        self._seen.append(stats)
        return (loss, None) if return_outputs else loss

    def log(self, logs: dict, *args, **kwargs) -> None:
        if self._seen and "loss" in logs:
            for key in dict.fromkeys(k for seen in self._seen for k in seen):
                values = [seen[key] for seen in self._seen if key in seen]
                logs[f"full_information/{key}"] = sum(values) / len(values)
            self._seen = []
        super().log(logs, *args, **kwargs)
