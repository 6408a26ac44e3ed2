"""Policies on disk: a directory with ``policy.json`` naming the weights to load.

``policy.json`` = {"model": <dir relative to the policy dir, or a hub id>, "round": r}, plus,
when round r trained a LoRA adapter, "adapter": "adapter" and "base": the policy directory
(relative to this one) whose weights the adapter applies to.
Round 0 is the base model; round r is written by grpo_train. Every stage loads a policy
with :func:`load`, the same way for the tiny model, a local directory or a hub id such as
meta-llama/Llama-3.2-3B-Instruct.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import numpy as np
import torch

from hitchhiker.cli import HitchhikerError

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL = ["<|pad|>", "<|unk|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"]


def read_spec(policy_dir: Path) -> dict:
    """A policy directory's policy.json, or a one-line error naming it."""
    spec_path = policy_dir / "policy.json"
    if not spec_path.is_file():
        raise HitchhikerError(f"policy {policy_dir}: no policy.json (not a policy directory)")
    try:
        spec = json.loads(spec_path.read_text())
    except json.JSONDecodeError as err:
        raise HitchhikerError(f"{spec_path} is not readable JSON ({err}): rerun the stage that wrote it") from None
    if not isinstance(spec, dict) or "model" not in spec:
        raise HitchhikerError(f"{spec_path} names no model: rerun the stage that wrote it")
    return spec


def require_round(policy_dir: str | Path, expected: int, asks: str) -> None:
    """Refuse a policy directory whose policy.json records another round than ``expected``:
    each stage names what it writes by --round, so another round's policy would be rolled
    out, trained from or reported as the wrong round's. ``asks`` is what --round asks for
    ("--round 2 rolls out")."""
    trained = read_spec(Path(policy_dir)).get("round")
    if trained is not None and trained != expected:
        raise HitchhikerError(f"--policy {policy_dir} is round {trained}'s policy; {asks} round {expected}'s")


def model_ref(policy_dir: str | Path) -> str:
    """The path or hub id that ``from_pretrained`` should load for a policy directory."""
    policy_dir = Path(policy_dir)
    ref = read_spec(policy_dir)["model"]
    local = policy_dir / ref
    return str(local) if local.exists() else ref


def write_spec(policy_dir: Path, model: str, round_: int, adapter_of: str | Path | None = None) -> None:
    """Write policy.json; ``adapter_of``: the policy the adapter/ of this one was trained on."""
    spec = {"model": model, "round": round_}
    if adapter_of is not None:
        spec |= {"adapter": "adapter", "base": os.path.relpath(adapter_of, policy_dir)}
    (policy_dir / "policy.json").write_text(json.dumps(spec, indent=2) + "\n")


def lora_adapter(policy_dir: str | Path) -> tuple[str, str] | None:
    """(model ref of the base weights, adapter directory) of a policy with a LoRA adapter, else None."""
    policy_dir = Path(policy_dir)
    spec = read_spec(policy_dir)
    if "adapter" not in spec:
        return None
    return model_ref(policy_dir / spec["base"]), str(policy_dir / spec["adapter"])


def load_tokenizer(policy_dir: str | Path, model_cfg: dict):
    from transformers import AutoTokenizer

    ref = model_ref(policy_dir)
    if ref.startswith(("/", "./", "../", "~")) and not Path(ref).expanduser().is_dir():
        raise HitchhikerError(f"config key model.name_or_path: directory {ref} does not exist")
    try:
        tok = AutoTokenizer.from_pretrained(ref, trust_remote_code=model_cfg["trust_remote_code"])
    except (OSError, ValueError) as err:
        raise HitchhikerError(f"model {ref}: cannot load its tokenizer ({str(err).splitlines()[0]})") from None
    if not tok.chat_template:
        raise HitchhikerError(f"model {ref}: its tokenizer has no chat template (an instruct model is needed)")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


@functools.cache
def native_bfloat16() -> str | None:
    """What computes bfloat16 natively here (a CUDA GPU that does; a CPU with AVX-512 BF16,
    AMX or Arm's BF16 instructions), or None. Without it torch's bfloat16 matmuls are
    emulated: 1 GFLOP/s against float32's 119 on an AVX2 AMD EPYC (benchmarks/train prints
    both), where with AMX they run 4-9x float32's speed and with AVX-512 BF16 2.3x on an AMD
    EPYC, 0.5x on an Intel Xeon without AMX (whose training step runs as fast in bf16 as in
    float32 all the same, in less memory: docs/performance.md)."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name() if torch.cuda.is_bf16_supported() else None
    caps = torch.cpu.get_capabilities()  # cpuinfo's flags, the same on every run of a machine
    return next((flag for flag in ("amx_bf16", "avx512_bf16", "bf16") if caps.get(flag)), None)


def dtype(model_cfg: dict) -> str:
    """model.dtype as this machine runs it: ``fast`` is bfloat16 where it is native
    (:func:`native_bfloat16`), float32 elsewhere; the others as given. Each stage resolves it
    on the machine it runs on, and says so."""
    name = model_cfg["dtype"]
    native = native_bfloat16()
    if name == "fast":
        name = "bfloat16" if native else "float32"
        _say(f"model.dtype fast: {name} ({f'native bfloat16: {native}' if native else 'no native bfloat16 here'})")
    elif name == "bfloat16" and not native:
        _say_emulated("model.dtype bfloat16")
    return name


def _say_emulated(what: str) -> None:
    _say(
        f"{what}: no native bfloat16 here, its matmuls are emulated (about 100x slower than float32's on an "
        "AVX2 CPU); model.dtype: fast runs float32 here and bfloat16 where it is native"
    )


@functools.cache  # once a process
def _say(line: str) -> None:
    print(line, flush=True)


def torch_dtype(model_cfg: dict):
    return {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        dtype(model_cfg)
    ]


def load_model(policy_dir: str | Path, model_cfg: dict):
    """A policy's causal LM, in model.dtype, on the CPU (sdpa attention: hitchhiker.training.attention's)."""
    from transformers import AutoModelForCausalLM

    from hitchhiker.training import attention

    attention.use()
    model = AutoModelForCausalLM.from_pretrained(
        model_ref(policy_dir), dtype=torch_dtype(model_cfg), trust_remote_code=model_cfg["trust_remote_code"]
    )
    if model_cfg["dtype"] == "auto" and model.dtype == torch.bfloat16 and not native_bfloat16():
        # most hub checkpoints are bfloat16: auto would run them emulated here without a word
        _say_emulated("model.dtype auto: the checkpoint is bfloat16")
    return model


def load(policy_dir: str | Path, model_cfg: dict, device: str | None = None):
    """(model, tokenizer) of a policy, in eval mode, on ``device`` (default: cuda if present)."""
    tok = load_tokenizer(policy_dir, model_cfg)
    model = load_model(policy_dir, model_cfg)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return model.to(device).eval(), tok


def chat(tokenizer, user_message: str) -> str:
    """The prompt text the model sees: the chat template with the generation prompt."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": user_message}], add_generation_prompt=True, tokenize=False
    )


def build_tiny(out_dir: Path, cfg: dict, env) -> None:
    """A small random-init LlamaForCausalLM with a BPE tokenizer trained here on the
    environment ``env``'s texts (its corpus), in HF format."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    model_cfg, seed = cfg["model"], cfg["seed"]
    tiny = model_cfg["tiny"]
    if tiny["hidden_size"] % tiny["num_heads"]:
        raise HitchhikerError(
            f"config key model.tiny.hidden_size = {tiny['hidden_size']} is not a multiple of "
            f"model.tiny.num_heads = {tiny['num_heads']}"
        )
    core = Tokenizer(models.BPE(unk_token="<|unk|>"))
    core.pre_tokenizer = pre_tokenizers.Metaspace()
    core.decoder = decoders.Metaspace()
    alphabet = [chr(c) for c in range(32, 127)] + ["\n", "▁"]
    trainer = trainers.BpeTrainer(
        vocab_size=tiny["vocab_size"], special_tokens=SPECIAL, initial_alphabet=alphabet, show_progress=False
    )
    core.train_from_iterator(env.corpus(cfg, seed), trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<|pad|>", unk_token="<|unk|>", eos_token="<|end|>", bos_token=None
    )
    tok.chat_template = CHAT_TEMPLATE

    torch.manual_seed(seed)
    heads = tiny["num_heads"]
    llama = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=tiny["hidden_size"],
        intermediate_size=2 * tiny["hidden_size"],
        num_hidden_layers=tiny["num_layers"],
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=2048,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(llama)
    model.generation_config = GenerationConfig(
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        do_sample=True,
        top_k=0,
        top_p=1.0,
        temperature=1.0,
    )
    if tiny["format_warmup_steps"]:
        _format_warmup(model, tok, env, cfg, seed, tiny["format_warmup_steps"])
    model.save_pretrained(out_dir / "model")
    tok.save_pretrained(out_dir / "model")


def turn_text(tokenizer, message: str, eos_written: bool) -> str:
    """The text that follows an assistant answer when the environment takes the next turn
    with user ``message``, in the chat template's own form: the end of the assistant turn
    (less the EOS when the model wrote it) and the user turn, up to the assistant's next
    generation prompt. Read from the template with markers; a template that does not extend
    a conversation by appending to it is refused."""
    closing, before, after = _turn_parts(tokenizer)
    if eos_written and tokenizer.eos_token and closing.startswith(tokenizer.eos_token):
        closing = closing[len(tokenizer.eos_token) :]
    return f"{closing}{before}{message}{after}"


@functools.cache  # per tokenizer object: every turn of every episode uses it
def _turn_parts(tokenizer) -> tuple[str, str, str]:
    answer, user = "\x03", "\x04"
    conv = [{"role": "user", "content": "\x02"}, {"role": "assistant", "content": answer}]
    head = tokenizer.apply_chat_template(conv, tokenize=False)
    full = tokenizer.apply_chat_template(
        [*conv, {"role": "user", "content": user}], add_generation_prompt=True, tokenize=False
    )
    if not full.startswith(head) or head.count(answer) != 1 or full.count(user) != 1:
        raise HitchhikerError(
            f"model {tokenizer.name_or_path}: its chat template does not extend a conversation by appending "
            "to it, so multi-turn episodes cannot be played"
        )
    before, after = full[len(head) :].split(user)
    return head.split(answer)[1], before, after


def _pad(x: list[int], value: int, width: int) -> list[int]:
    return x + [value] * (width - len(x))


def _format_warmup(model, tok, env, cfg: dict, seed: int, steps: int, batch: int = 12) -> None:
    """Supervised steps on prompts of every format, window and horizon, each answered once
    with every valid first word (A and B; long, flat and short; ...) and a stock reason: the
    model learns the answer format and, since every prompt carries every label equally,
    no preference among them (a batch of randomly drawn labels would leave one). Loss on the
    answer tokens only. Hand-written rather than TRL's SFTTrainer: a few hundred steps on a
    model of a few hundred kilobytes, where the trainer's set-up would cost more."""
    rng = np.random.default_rng(seed + 1)
    examples = []  # per prompt, one (input ids, labels) row per first word
    for i in range(64 * batch):
        prompt, words = env.practice_turn(cfg, rng, i)
        ids = tok(chat(tok, prompt), add_special_tokens=False).input_ids
        reason = f" {rng.choice(env.practice_reasons)}{tok.eos_token}"
        rows = []
        for word in words:
            target = tok(word + reason, add_special_tokens=False).input_ids
            rows.append((ids + target, [-100] * len(ids) + target))
        examples.append(rows)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        rows = [row for j in rng.integers(0, len(examples), batch) for row in examples[j]]
        width = max(len(ids) for ids, _ in rows)
        input_ids = torch.tensor([_pad(ids, tok.pad_token_id, width) for ids, _ in rows])
        labels = torch.tensor([_pad(lab, -100, width) for _, lab in rows])
        mask = torch.tensor([_pad([1] * len(ids), 0, width) for ids, _ in rows])
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
