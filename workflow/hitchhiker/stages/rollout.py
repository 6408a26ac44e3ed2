"""rollout: sample B completions (episodes, in a multi-turn environment) per train state with
the policy of the previous round.

Round r draws rollout.states_per_round train states (a fresh seeded draw per round) and
rolls them out with policy round r-1; each state's temperature is drawn uniformly from
[temperature - eps, temperature + eps]. Each row keeps the completion token ids and the
behaviour policy's per-token logprobs, which grpo_train replays; the prompt token ids, the
same for every sample of a state, go once per state to the --prompts file.

With rollout.each_answer the policy does not choose the answer: each of the state's
answers (the environment's priced actions: "yes" and "no") is written for it, followed by
"because", and the policy samples the reason after it, rollout.samples_per_state / (number
of answers) times each. The written words are part of the completion (the model's own: the
trained policy writes them itself) with a behaviour logprob of 0, which full_information,
the only objective that takes such samples, does not read.

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
OPENER = "because"  # what each_answer writes after the answer word


def _next_turn(env, states: pd.DataFrame, reward_cfg: dict, i: int, answers: list[str]):
    """The environment's next user message in the episode of state row ``i`` (module level:
    vLLM engines in other processes receive it pickled)."""
    return env.next_turn(states.iloc[i], answers, reward_cfg)


def sample(
    states: pd.DataFrame,
    policy_dir: str,
    cfg: dict,
    temperatures: np.ndarray,
    n: int,
    seed: int,
    desc: str,
    answers: list[str] | None = None,
) -> pd.DataFrame:
    """Generate ``n`` completions per state (temperature 0: one, greedy); one row per sample.
    With ``answers``, n / len(answers) per answer, each continuing "<answer> because"."""
    ro, model_cfg = cfg["rollout"], cfg["model"]
    if ro["backend"] == "vllm":
        model, tok = None, policy.load_tokenizer(policy_dir, model_cfg)
    else:
        model, tok = policy.load(policy_dir, model_cfg)
    prompt_ids = [tok(policy.chat(tok, p), add_special_tokens=False).input_ids for p in states["prompt"]]
    if answers:
        written = [tok(f"{a} {OPENER}", add_special_tokens=False).input_ids for a in answers]
        prompt_ids = [p + w for p in prompt_ids for w in written]
        temperatures, n = np.repeat(temperatures, len(answers)), n // len(answers)
    asked = states.iloc[np.repeat(np.arange(len(states)), len(answers))] if answers else states  # a row a prompt
    next_turn = functools.partial(_next_turn, environments.get(cfg["environment"]), asked, cfg["reward"])
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
    if answers:  # back to one prompt a state: the written words lead each completion
        k = len(answers)
        for r in rows:
            w = written[r["prompt_index"] % k]
            r["sample_idx"] += n * (r["prompt_index"] % k)
            r["prompt_index"] //= k
            r["prompt_ids"] = r["prompt_ids"][: len(r["prompt_ids"]) - len(w)]
            r["completion_ids"] = w + r["completion_ids"]
            r["logprobs"] = [0.0] * len(w) + r["logprobs"]
            r["model_mask"] = [1] * len(w) + r["model_mask"]
            r["completion"] = tok.decode(r["completion_ids"], skip_special_tokens=True)
            r["answers"] = [r["completion"]]
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


def _answers(cfg: dict, outcomes_path: str | None, n: int) -> list[str]:
    """The answers rollout.each_answer writes: the environment's priced actions (their texts
    only: no reward is read here), each given n / len(answers) samples."""
    if not outcomes_path:
        raise cli.HitchhikerError("rollout.each_answer writes each priced answer: give --outcomes")
    env = environments.get(cfg["environment"])
    priced = env.action_rewards(artifacts.read_parquet(outcomes_path, artifacts.OUTCOMES), cfg["reward"])
    sets = priced.groupby("state_id", sort=False)["action"].agg(tuple).unique()
    if len(sets) > 1:
        raise cli.HitchhikerError(
            f"rollout.each_answer writes the same answers for every state, but the states' answers differ "
            f"({', '.join(map('/'.join, sets[:3]))}): give the run states of one format"
        )
    answers = list(sets[0])
    if n % len(answers):
        raise cli.HitchhikerError(
            f"config key rollout.samples_per_state = {n}: rollout.each_answer samples each of the "
            f"{len(answers)} answers ({', '.join(answers)}) equally; make it a multiple of {len(answers)}"
        )
    return answers


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
    answers = _answers(cfg, args.outcomes, ro["samples_per_state"]) if ro["each_answer"] else None
    eps = ro["temperature_eps"]
    temps = rng.uniform(ro["temperature"] - eps, ro["temperature"] + eps, size=len(drawn))
    desc = f"rollout round {args.round}"
    out = sample(drawn, args.policy, cfg, temps, ro["samples_per_state"], cfg["seed"] + args.round, desc, answers)
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
