"""rollout: sample B completions (episodes, in a multi-turn environment) per train state with
the policy of the previous round.

Round r draws rollout.states_per_round train states (a fresh seeded draw per round) and
rolls them out with policy round r-1; each state's temperature is drawn uniformly from
[temperature - eps, temperature + eps]. Each row keeps the completion token ids and the
behaviour policy's per-token logprobs, which grpo_train replays; the prompt token ids, the
same for every sample of a state, go once per state to the --prompts file.

Usage:
  python -m hitchhiker.stages.rollout --config config.yaml --round 1 \\
      --states results/default/states.parquet [--outcomes results/default/outcomes.parquet] \\
      --policy results/default/policy/round_0 \\
      --out results/default/rollouts/round_1.parquet --prompts results/default/rollouts/round_1.prompts.parquet
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from hitchhiker import artifacts, cli, config, environments, generation, policy

SECTIONS = ["run", "seed", "environment", "model", "rollout", "reward"]


def _next_turn(env, states: pd.DataFrame, reward_cfg: dict, i: int, answers: list[str]):
    """The environment's next user message in the episode of state row ``i`` (module level:
    vLLM engines in other processes receive it pickled)."""
    return env.next_turn(states.iloc[i], answers, reward_cfg)


def sample(
    states: pd.DataFrame, policy_dir: str, cfg: dict, temperatures: np.ndarray, n: int, seed: int, desc: str
) -> pd.DataFrame:
    """Generate ``n`` completions per state (temperature 0: one, greedy); one row per sample."""
    ro, model_cfg = cfg["rollout"], cfg["model"]
    if ro["backend"] == "vllm":
        model, tok = None, policy.load_tokenizer(policy_dir, model_cfg)
    else:
        model, tok = policy.load(policy_dir, model_cfg)
    prompt_ids = [tok(policy.chat(tok, p), add_special_tokens=False).input_ids for p in states["prompt"]]
    next_turn = functools.partial(_next_turn, environments.get(cfg["environment"]), states, cfg["reward"])
    if ro["backend"] == "vllm":
        ref, adapter = policy.model_ref(policy_dir), None
        if ro["vllm_lora"] and (lora := policy.lora_adapter(policy_dir)):
            ref, adapter = lora
        rows = generation.vllm_generate(
            ref,
            prompt_ids,
            list(temperatures),
            n,
            ro["max_new_tokens"],
            seed,
            ro["tensor_parallel_size"],
            model_cfg["trust_remote_code"],
            dtype=policy.dtype(model_cfg),
            cpu_kv_cache_gib=ro["vllm_cpu_kv_cache_gib"],
            adapter=adapter,
            next_turn=next_turn,
            tokenizer=tok,
        )
    else:

        def generate(ids, temps, n_per, seed_):
            return generation.transformers_generate(
                model, tok, ids, temps, n_per, ro["max_new_tokens"], ro["batch_size"], seed_, desc
            )

        rows = generation.play(generate, tok, prompt_ids, list(temperatures), n, next_turn, seed)
    out = pd.DataFrame(rows)  # prompt_index: the row of ``states`` (evaluate tells changed prompts apart by it)
    out.insert(0, "state_id", states["state_id"].to_numpy()[out["prompt_index"]])
    out["backend"] = generation.backend_version(ro["backend"])
    return out


def informative(env, out: pd.DataFrame, states: pd.DataFrame, outcomes: pd.DataFrame, reward_cfg: dict) -> int:
    """How many of ``out``'s groups the environment pays unequally (its reward, before the
    grounding terms score adds: those can only add spread)."""
    keys = out[["state_id", "sample_idx", "completion", "answers"]]
    drawn = states[states["state_id"].isin(keys["state_id"])]
    scored = env.score(keys, drawn, outcomes[outcomes["state_id"].isin(keys["state_id"])], reward_cfg)
    reward = scored["reward"].groupby(keys["state_id"])
    return int(((reward.max() - reward.min()) > 0).sum())


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--round", type=int, required=True, help="round r >= 1 (rolls out policy r-1)")
    p.add_argument("--states", required=True)
    p.add_argument("--policy", required=True, help="policy directory of round r-1")
    p.add_argument("--outcomes", help="the states' outcomes: read only under rollout.dynamic_sampling")
    p.add_argument("--out", required=True, help="Parquet to write: one row per sample")
    p.add_argument("--prompts", required=True, help="Parquet to write: prompt token ids, one row per state")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    if args.round < 1:
        raise cli.HitchhikerError(f"--round {args.round}: rounds start at 1")
    policy.require_round(args.policy, args.round - 1, f"--round {args.round} rolls out")
    ro = cfg["rollout"]
    if ro["dynamic_sampling"]:
        if not args.outcomes:
            raise cli.HitchhikerError("rollout.dynamic_sampling counts informative groups: give --outcomes")
        outcomes = artifacts.read_parquet(args.outcomes, artifacts.OUTCOMES)
    rng = np.random.default_rng([cfg["seed"], args.round])
    train = artifacts.read_parquet(args.states, artifacts.STATES).query("split == 'train'").reset_index(drop=True)
    order = rng.permutation(len(train))
    asked = ro["states_per_round"]
    if asked > len(train):
        cli.console(
            f"rollout round {args.round}: rollout.states_per_round {asked} is more than the run's "
            f"{len(train)} train states: the round draws all {len(train)}"
        )
    drawn = train.iloc[np.sort(order[:asked])].reset_index(drop=True)
    eps = ro["temperature_eps"]
    temps = rng.uniform(ro["temperature"] - eps, ro["temperature"] + eps, size=len(drawn))
    desc = f"rollout round {args.round}"
    out = sample(drawn, args.policy, cfg, temps, ro["samples_per_state"], cfg["seed"] + args.round, desc)
    if ro["dynamic_sampling"]:
        env = environments.get(cfg["environment"])
        limit = min(len(train), math.floor(ro["dynamic_sampling"] * asked))
        useful, parts, n = informative(env, out, drawn, outcomes, cfg["reward"]), [out], len(drawn)
        while useful < asked and n < limit:
            # as many more as the informative share so far says the missing groups need
            more = min(limit - n, math.ceil((asked - useful) * n / max(useful, 1)))
            chunk = train.iloc[np.sort(order[n : n + more])].reset_index(drop=True)
            temps = rng.uniform(ro["temperature"] - eps, ro["temperature"] + eps, size=len(chunk))
            part = sample(chunk, args.policy, cfg, temps, ro["samples_per_state"], int(rng.integers(2**31)), desc)
            useful += informative(env, part, chunk, outcomes, cfg["reward"])
            parts.append(part)
            n += more
        out = pd.concat(parts, ignore_index=True)
        cli.console(
            f"rollout round {args.round}: dynamic sampling: {useful} informative groups (rewards differ) "
            f"of {n} states drawn, {asked} asked, at most {limit}"
        )
    out = out.drop(columns="prompt_index")
    out.insert(1, "round", args.round)
    out["policy"] = policy.model_ref(args.policy)
    prompts = out.drop_duplicates("state_id")[["state_id", "round", "prompt_ids"]]
    artifacts.write_parquet(prompts, args.prompts)
    artifacts.write_parquet(out.drop(columns="prompt_ids"), args.out)
    print(
        f"rollout: round {args.round}, {out['state_id'].nunique()} states x {ro['samples_per_state']} samples, "
        f"{(out.finish == 'eos').mean():.0%} ended with EOS -> {args.out}{cli.device_note()}"
    )


if __name__ == "__main__":
    cli.run(main)
