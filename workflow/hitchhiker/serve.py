"""serve: a run's audited states as an OpenEnv environment, over HTTP and WebSocket (OpenEnv's
own server, openenv-core), for any trainer that speaks OpenEnv (TRL, SkyRL, Unsloth).

    python -m hitchhiker.serve --config config.yaml [--config configs/weather.yaml ...] \\
        [--split train] [--host 127.0.0.1] [--port 8000]

after `snakemake results/<run>/audit.json`. An episode is one state of the split (train unless
``--split test`` asks for the held-out one): ``reset(seed=s, episode_id=...)`` gives the
split's state number s (modulo their number, in states.parquet's order: seeds 0, 1, ... play
each state once; or ``state_id=...`` names it) and returns its prompt; ``step({"text": answer})``
answers it. In a multi-turn environment (sequential) each step but the last returns the next
turn's prompt, with ``done`` false and no reward, as rollout plays it. The last step scores
the episode's answers with the score stage's own code (for_trl.Task, rewards.grounded) and
ends it: its reward, ``done``, ``score`` (what the score stage stores: validity and why not,
the claim counts, the environment's reward before the grounding terms) and ``outcome`` (what
happened, which paid it). The reason bonus's "how many answers give the same reason" is
counted over one episode here, so it pays a supported reason in full.

    from openenv.core import GenericEnvClient

    with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        first = env.reset(seed=0)
        result = env.step({"text": "yes, it rained today"})
        print(result.reward, result.observation["score"], result.observation["outcome"])
"""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

import numpy as np
from pydantic import Field

from hitchhiker import cli
from hitchhiker.for_trl import Task

try:
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
except ImportError:
    raise SystemExit("hitchhiker: error: serve needs OpenEnv's server: pip install -e '.[openenv]'") from None


class Answer(Action):
    """The policy's answer to the state's prompt, as the pipeline's rollout would write it."""

    text: str = Field(..., description="the completion: the decision first, then its reason")


class Prompt(Observation):
    """A state's prompt (after reset) or the scored end of its episode (after step)."""

    prompt: str = Field(default="", description="the state's prompt, a chat user message")
    state_id: str = Field(default="", description="the state (states.parquet's state_id)")
    date: str = Field(default="", description="the state's decision date")
    score: dict[str, Any] = Field(default_factory=dict, description="after step: the score stage's columns")
    outcome: dict[str, Any] = Field(default_factory=dict, description="after step: the outcome that paid it")


def _plain(value: Any) -> Any:
    """A value of a pandas row as JSON has it (numpy scalars and arrays to Python)."""
    return json.loads(json.dumps(value, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))


class Episode(Environment):
    """One state of the task's split per episode: reset shows it, step scores the answer."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session its own instance; the task is read only

    def __init__(self, task: Task):
        super().__init__()
        self.task = task
        self.row = None
        self._state = State(episode_id=str(uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Prompt:
        states = self.task.states
        if "state_id" in kwargs:
            match = states.index[states["state_id"] == kwargs["state_id"]]
            if not len(match):
                raise ValueError(f"state {kwargs['state_id']} is not one of the run's {self.task.split} states")
            i = int(match[0])
        else:
            i = (int(np.random.default_rng().integers(len(states))) if seed is None else seed) % len(states)
        self.row, self.answers = states.iloc[i], []
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0, state_id=self.row["state_id"])
        return Prompt(prompt=self.row["prompt"], state_id=self.row["state_id"], date=str(self.row["date"].date()),
                      done=False, reward=None)  # fmt: skip

    def step(self, action: Answer, timeout_s: float | None = None, **kwargs: Any) -> Prompt:
        if self.row is None:
            raise ValueError("step before reset: reset draws the state the answer is for")
        self.answers.append(action.text)
        self._state.step_count += 1
        after = self.task.env.next_turn(self.row, self.answers, self.task.cfg["reward"])
        if after is not None:  # the environment's next turn, as rollout plays it
            return Prompt(prompt=after, state_id=self.row["state_id"], date=str(self.row["date"].date()),
                          done=False, reward=None)  # fmt: skip
        scored = self.task.score_episodes([self.answers], [self.row["state_id"]]).iloc[0]
        outcome = self.task.outcomes[self.task.outcomes["state_id"] == self.row["state_id"]].iloc[0]
        row, self.row = self.row, None  # the episode is over
        return Prompt(
            state_id=row["state_id"],
            date=str(row["date"].date()),
            done=True,
            reward=float(scored["reward"]),
            score={k: _plain(v) for k, v in scored.drop(["state_id", "sample_idx", "reward"]).items()},
            outcome={k: _plain(v) for k, v in outcome.drop("state_id").items()},
        )

    @property
    def state(self) -> State:
        return self._state


def app(task: Task):
    """The FastAPI app serving ``task`` (OpenEnv's /reset, /step, /state, /schema, /ws)."""
    return create_app(lambda: Episode(task), Answer, Prompt, env_name=f"hitchhiker-{task.env.name}",
                      max_concurrent_envs=64)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    p.add_argument("--config", action="append", required=True, help="the run's config file(s), as to snakemake")
    p.add_argument("--results", default="results", help="the folder holding results/<run>/")
    p.add_argument("--split", default="train", choices=["train", "test"], help="test only when asked for")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    args = p.parse_args(argv)
    task = Task(*args.config, results=args.results, split=args.split)
    import uvicorn

    print(f"serve: {len(task.states)} {args.split} states of {task.cfg['run']} ({task.env.name}) "
          f"at http://{args.host}:{args.port}", flush=True)  # fmt: skip
    uvicorn.run(app(task), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    cli.run(main, announce=False)
