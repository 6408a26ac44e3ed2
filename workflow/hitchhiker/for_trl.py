"""A hitchhiker run's audited states and its environment's reward, for TRL's GRPOTrainer: train
on the leakage-audited market (or the weather) without the rest of the pipeline.

    from trl import GRPOConfig, GRPOTrainer
    from hitchhiker.for_trl import Task

    task = Task("config.yaml")  # after `snakemake results/default/audit.json`
    trainer = GRPOTrainer(model="HuggingFaceTB/SmolLM2-135M-Instruct", reward_funcs=task.reward,
                          train_dataset=task.dataset(), args=GRPOConfig(output_dir="out"))
    trainer.train()

The prompts are the run's audited train states (``states.parquet``, each a chat user message;
the test split only when asked for, ``split="test"``), and the reward is the score stage's,
by the same code (rewards.grounded): the environment's reward for the answer, its costs, and
the grounding terms of the run's config, the reason bonus's "how many answers give the same
reason" counted over the batch TRL scores (a round's answers in our score stage).

Why a reward function rather than TRL's ``environment_factory``: an environment instance there
sees the completion only through the tools the model calls, and a hitchhiker environment
judges the answer text itself (its first word, its reason's claims); the reward function
receives that text and the state id column, which is all the score needs. Episodes of several
turns (the sequential environment) need the environment between turns, which a reward
function cannot give: dataset and reward refuse them (hitchhiker.serve plays them turn by
turn, through :meth:`Task.score_episodes`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hitchhiker import artifacts, config, environments, rewards
from hitchhiker.cli import HitchhikerError


def _merged(files: tuple[str | Path, ...]) -> dict:
    """The config files merged as `snakemake --configfile a b` merges them (later over
    earlier, nested sections key by key), less the default file's sections that this run's
    environment does not read (config.drop_inherited)."""

    def merge(into: dict, over: dict) -> None:
        for key, value in over.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value

    cfg: dict = {}
    for f in files:
        merge(cfg, config.read(f))
    config.drop_inherited(cfg, [Path(files[0])], [Path(f) for f in files[1:]])
    return config.validate(cfg)


class Task:
    """The states of one split of a run and the reward of its environment."""

    def __init__(self, *config_files: str | Path, results: str | Path = "results", split: str = "train"):
        if not config_files:
            raise HitchhikerError("Task: name the run's config file(s), as given to snakemake --configfile")
        self.cfg = _merged(config_files)
        self.env = environments.get(self.cfg["environment"])
        if split not in ("train", "test"):
            raise HitchhikerError(f"Task: split = {split!r}, not 'train' or 'test'")
        run = Path(results) / self.cfg["run"]
        if not (run / "audit.json").is_file():
            raise HitchhikerError(
                f"Task: {run / 'audit.json'} does not exist: build and audit the states first "
                f"(snakemake {run / 'audit.json'} --configfile {' '.join(map(str, config_files))})"
            )
        states = artifacts.read_parquet(run / "states.parquet", artifacts.STATES)
        self.states = states[states["split"] == split].reset_index(drop=True)
        outcomes = artifacts.read_parquet(run / "outcomes.parquet", artifacts.OUTCOMES)
        self.outcomes = outcomes[outcomes["state_id"].isin(self.states["state_id"])].reset_index(drop=True)
        self.split = split

    def _one_turn(self) -> None:
        if self.env.has_turns(self.cfg):
            raise HitchhikerError(
                f"Task: the {self.env.name} environment's episodes have several turns, which a TRL reward "
                "function cannot play; serve them (python -m hitchhiker.serve) or train with the pipeline"
            )

    def dataset(self):
        """The split's states as a datasets.Dataset: ``prompt`` (one user message) and ``state_id``."""
        from datasets import Dataset

        self._one_turn()
        return Dataset.from_dict(
            {
                "prompt": [[{"role": "user", "content": p}] for p in self.states["prompt"]],
                "state_id": self.states["state_id"].tolist(),
            }
        )

    def score(self, completions: list, state_id: list[str]) -> pd.DataFrame:
        """The score stage's columns for each completion (text, or TRL's conversational
        [{"role": "assistant", "content": ...}]) of the state ``state_id`` names."""
        self._one_turn()
        texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        return self.score_episodes([[t] for t in texts], state_id)

    def score_episodes(self, answers: list[list[str]], state_id: list[str]) -> pd.DataFrame:
        """The score stage's columns for each episode: the model's answer to each of its turns
        (one turn in a single-turn environment) in the state ``state_id`` names."""
        unknown = sorted(set(state_id) - set(self.states["state_id"]))
        if unknown:
            raise HitchhikerError(f"Task: state {unknown[0]} is not one of the run's {self.split} states")
        texts = ["\n".join(a) for a in answers]  # what the rationale measures read: every turn's answer
        keys = pd.DataFrame({"state_id": list(state_id), "sample_idx": range(len(texts)), "completion": texts})
        keys["answers"] = [list(a) for a in answers]
        drawn = self.states[self.states["state_id"].isin(keys["state_id"])]
        outcomes = self.outcomes[self.outcomes["state_id"].isin(drawn["state_id"])]
        return rewards.grounded(self.env, keys, drawn, outcomes, self.cfg)

    def reward(self, prompts=None, completions=None, state_id=None, **kwargs) -> list[float]:
        """TRL's reward function: the score stage's reward of each completion."""
        self._one_turn()
        return self.score(completions, state_id)["reward"].astype(float).tolist()
