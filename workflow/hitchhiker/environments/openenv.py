"""The openenv environment: anyone's OpenEnv environment (a server speaking OpenEnv's
reset/step, such as ``python -m hitchhiker.serve``), trained through this pipeline:
rollout, score, the buffer, every objective that needs no priced actions, evaluate.

Data (``fetch``): states.train.max_states episodes of the server at openenv.url, reset with
seeds 0, 1, ..., and states.test.max_states of the held-out server at openenv.test_url (the
same server, seeds from openenv.test_seed, where none is given); each reset's observation
gives the prompt (its openenv.prompt_field), and where it has them, its state_id and date.
An episode without a date is dated by its position (a day apart, train before test): the
intervals' blocks are then single episodes. The states.train/test dates, window and embargo
are the server's business, not read here.
State: one episode's first observation. Outcome: none the pipeline can see (the server keeps it).
Score: each answer in a fresh episode of its state: reset with the state's seed, then step
with the answer (its openenv.action_field); the reward is the step's. With openenv.turns 1
(the default) an episode that does not end on the first step is refused (one decision per
state). With more, rollout and evaluate play each episode turn by turn: after each answer
the episode is replayed from its seed (reset, then a step per answer so far: the client keeps
no session between calls, so any worker can play any turn) and the last step's observation is
the next user turn, until the server says done; score replays the whole episode and pays the
sum of its steps' rewards. An episode still going after openenv.turns answers is refused.
Validity, correctness and claim counts are the last observation's ``score`` where it gives
them (hitchhiker.serve's does); otherwise every answer the server rewards is valid,
correctness is not measured and no claim is checked.
Audit: a remote environment's data is not ours to read, so no leakage audit is possible
here (audit.json says so); what it checks is what scoring relies on: each state's seed gives
its prompt again.
Baselines: none (the server's rules are not known here).
"""

from __future__ import annotations

import atexit
import hashlib
from contextlib import ExitStack
from typing import ClassVar

import numpy as np
import pandas as pd

from hitchhiker.cli import HitchhikerError
from hitchhiker.environments.base import Environment

# what an observation's score dict may give, as the score stage stores it
FROM_SCORE = ("valid", "invalid_reason", "correct", "claims", "unsupported_claims", "supported_claims")
FIRST_DAY = pd.Timestamp("2000-01-03")  # the dates of undated episodes: one a day from here


def _clients(stack: ExitStack, urls: list[str]) -> dict:
    """One connected synchronous OpenEnv client (OpenEnv's own GenericEnvClient) per server,
    closed with ``stack``."""
    try:
        from openenv.core import GenericEnvClient
    except ImportError:
        raise HitchhikerError("environment openenv needs OpenEnv's client: pip install -e '.[openenv]'") from None
    return {
        url: _call("connecting", url, stack.enter_context, GenericEnvClient(base_url=url).sync())
        for url in dict.fromkeys(urls)
    }


_OPEN = ExitStack()  # the clients next_turn keeps open in this process, one per server
_KEPT: dict = {}
atexit.register(_OPEN.close)


def _kept(url: str):
    """This process's client of ``url`` (opened at first use, closed at exit): next_turn
    is called once per episode and turn, too often to connect each time."""
    if url not in _KEPT:
        _KEPT.update(_clients(_OPEN, [url]))
    return _KEPT[url]


def _play(client, url: str, seed: int, field: str, answers: list[str]) -> tuple[object, float]:
    """A fresh episode of ``seed`` stepped with ``answers`` until it ends: its last step's
    result and the sum of its steps' rewards."""
    _call("reset", url, client.reset, seed=seed)
    total, result = 0.0, None
    for text in answers:
        result = _call("step", url, client.step, {field: text})
        total += float(result.reward or 0.0)
        if result.done:
            break
    return result, total


def _call(what: str, url: str, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # the client raises connection, protocol and server errors alike
        line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise HitchhikerError(f"openenv server {url}: {what} failed ({line})") from None


class OpenEnv(Environment):
    """An OpenEnv server's episodes; environments/base.py documents each method."""

    name = "openenv"
    data_name = "episodes"
    dated_splits = False  # the servers deal the episodes; states.<split>.max_states counts them
    data_columns = ("date", "split", "seed", "state_id", "prompt", "server", "prompt_field", "action_field", "turns")
    state_columns = ("seed", "server", "prompt_field", "action_field", "turns")
    config_schema: ClassVar[dict] = {
        "type": "object",
        "additionalProperties": False,
        "default": {},
        "description": "The openenv environment's own keys (environment = openenv): the OpenEnv server trained on.",
        "properties": {
            "url": {
                "type": ["string", "null"],
                "default": None,
                "description": "The OpenEnv server of the train episodes, e.g. http://127.0.0.1:8000 (required).",
            },
            "test_url": {
                "type": ["string", "null"],
                "default": None,
                "description": "The server of the held-out episodes; null: openenv.url, from openenv.test_seed on.",
            },
            "test_seed": {
                "type": "integer",
                "minimum": 0,
                "default": 1000000,
                "description": "The first seed of the held-out episodes on openenv.url (when test_url is null).",
            },
            "prompt_field": {
                "type": "string",
                "default": "prompt",
                "description": "The observation's field holding the text the model reads.",
            },
            "action_field": {
                "type": "string",
                "default": "text",
                "description": "The action's field the model's answer goes in.",
            },
            "turns": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": (
                    "The most answers an episode takes. 1: one decision a state, its episode must end on its "
                    "first step. More: each episode is played turn by turn (the step's observation is the "
                    "next prompt) until the server says done, and paid the sum of its steps' rewards; "
                    "train.objective dpo is then refused, as for our own multi-turn environment."
                ),
            },
        },
    }

    def has_turns(self, cfg: dict | None = None) -> bool:
        return bool(cfg) and cfg.get("openenv", {}).get("turns", 1) > 1

    def next_turn(self, state, answers: list[str], reward_cfg: dict) -> str | None:
        if len(answers) >= int(state["turns"]):
            return None
        url, seed = state["server"], int(state["seed"])
        result, _ = _play(_kept(url), url, seed, state["action_field"], answers)
        if result is None or result.done:
            return None
        obs = result.observation
        return obs.get(state["prompt_field"]) if isinstance(obs, dict) else None

    def check_config(self, cfg: dict) -> None:
        own = cfg.get("openenv", {})
        if "openenv" in cfg and not own.get("url"):
            raise HitchhikerError("config key openenv.url is required: the OpenEnv server to train on")
        if cfg.get("states", {}).get("horizon", 1) != 1:
            raise HitchhikerError(
                f"config key states.horizon = {cfg['states']['horizon']}: an OpenEnv episode here is one answer, "
                "paid at once (set 1)"
            )
        if cfg.get("train", {}).get("objective") == "full_information":
            raise HitchhikerError(
                "config key train.objective = full_information: a remote OpenEnv environment does not price "
                "every action of a state"
            )

    def _splits(self, cfg: dict) -> list[tuple[str, str, list[int]]]:
        own, st = cfg["openenv"], cfg["states"]
        test_url = own["test_url"] or own["url"]
        test_first = 0 if own["test_url"] else own["test_seed"]
        out = [("train", own["url"], list(range(st["train"]["max_states"] or 0)))]
        if st.get("test"):
            out.append(("test", test_url, list(range(test_first, test_first + (st["test"]["max_states"] or 0)))))
        return [s for s in out if s[2]]

    def describe_data(self, cfg: dict) -> str:
        own = cfg["openenv"]
        return f"OpenEnv server {own['url']}" + (f", held out {own['test_url']}" if own["test_url"] else "")

    def fetch(self, cfg: dict) -> tuple[pd.DataFrame, list[str]]:
        own, rows = cfg["openenv"], []
        splits = self._splits(cfg)
        if not splits:
            raise HitchhikerError("config key states.train.max_states: the number of train episodes, at least 1")
        with ExitStack() as stack:
            clients = _clients(stack, [u for _, u, _ in splits])
            for split, url, seeds in splits:
                for seed in seeds:
                    obs = _call("reset", url, clients[url].reset, seed=seed).observation
                    prompt = obs.get(own["prompt_field"]) if isinstance(obs, dict) else None
                    if not isinstance(prompt, str) or not prompt.strip():
                        have = ", ".join(obs) if isinstance(obs, dict) else type(obs).__name__
                        raise HitchhikerError(
                            f"config key openenv.prompt_field = {own['prompt_field']!r}: the observation of "
                            f"{url} holds no text there (it has: {have})"
                        )
                    rows.append((obs.get("date") or None, split, seed, obs.get("state_id") or None, prompt, url,
                                 own["prompt_field"], own["action_field"], own["turns"]))  # fmt: skip
        table = pd.DataFrame(rows, columns=list(self.data_columns))
        undated = table["date"].isna()
        table["date"] = pd.to_datetime(table["date"].where(~undated, None))
        table.loc[undated, "date"] = FIRST_DAY + pd.to_timedelta(np.flatnonzero(undated.to_numpy()), unit="D")
        named = table["state_id"].notna()
        table.loc[~named, "state_id"] = [
            hashlib.sha256(f"{u}\x1f{s}\x1f{p}".encode()).hexdigest()[:16]
            for u, s, p in table.loc[~named, ["server", "seed", "prompt"]].itertuples(index=False)
        ]
        same = table.duplicated(["split", "state_id"])
        if same.any():
            r = table[same].iloc[0]
            raise HitchhikerError(
                f"openenv server {r.server}: seed {r.seed} gives state {r.state_id} again: its {r.split} split holds "
                f"fewer episodes than states.{r.split}.max_states asks"
            )
        counts = table.groupby("split").size().to_dict()
        return table, [f"{self.describe_data(cfg)}: " + ", ".join(f"{n} {s} episodes" for s, n in counts.items())]

    def make_states(self, prices, cfg, fits):
        table = prices.reset_index(drop=True)
        ok = np.asarray(fits(table["prompt"].tolist(), cfg["states"]["max_prompt_tokens"]), dtype=bool)
        if not ok.all():
            raise HitchhikerError(
                f"config key states.max_prompt_tokens = {cfg['states']['max_prompt_tokens']}: fewer tokens than "
                f"{int((~ok).sum())} of the server's prompts (the first: seed {table['seed'][~ok].iloc[0]})"
            )
        base = {"state_id": table["state_id"], "split": table["split"], "format": "openenv"}
        states = pd.DataFrame({**base, "date": table["date"], "horizon": 1, "prompt": table["prompt"],
                               **{k: table[k] for k in self.state_columns}})  # fmt: skip
        # the outcome is the step's, at once: dated a day after the state (one period, horizon 1)
        return states, pd.DataFrame({**base, "outcome_date": table["date"] + pd.Timedelta(days=1)})

    def audit(self, prices, states, outcomes, cfg) -> dict:
        """Each state's seed must give its prompt again (scoring resets it once per answer)."""
        with ExitStack() as stack:
            clients = _clients(stack, states["server"].tolist())
            for s in states.itertuples(index=False):
                obs = _call("reset", s.server, clients[s.server].reset, seed=int(s.seed)).observation
                if obs.get(cfg["openenv"]["prompt_field"]) != s.prompt:
                    raise HitchhikerError(
                        f"audit: openenv server {s.server}: seed {s.seed} gave another prompt than before: its "
                        "episodes are not seeded, so an answer cannot be scored on the state it answered"
                    )
        return {
            "states_checked": len(states),
            "frequency": "daily",
            "period": "episode",
            "not_audited": "a remote OpenEnv environment's data is the server's: no look-ahead audit here",
        }

    def score(self, samples, states, outcomes, reward_cfg):
        by_id = states.set_index("state_id")
        rows = []
        with ExitStack() as stack:
            clients = _clients(stack, by_id["server"].tolist())
            said = samples["answers"] if "answers" in samples else samples["completion"].map(lambda c: [c])
            for sid, answers in zip(samples["state_id"], said, strict=True):
                s = by_id.loc[sid]
                url, seed, turns = s["server"], int(s["seed"]), int(s["turns"])
                answers = [str(a) for a in list(answers)[:turns]]
                result, total = _play(clients[url], url, seed, s["action_field"], answers)
                if not result.done:
                    raise HitchhikerError(
                        f"openenv server {url}: seed {seed}'s episode did not end after {len(answers)} answer(s): "
                        + ("set openenv.turns to the most answers an episode takes" if len(answers) == turns
                           else "the episode was cut short")
                    )  # fmt: skip
                given = result.observation.get("score") if isinstance(result.observation, dict) else None
                rows.append((total, given if isinstance(given, dict) else {}))
        reward = np.array([r for r, _ in rows])
        got = {k: [g.get(k) for _, g in rows] for k in FROM_SCORE}
        valid = np.array([True if v is None else bool(v) for v in got["valid"]])

        def numbers(k: str) -> np.ndarray:
            return np.array([0.0 if v is None else float(v) for v in got[k]])

        why = [None if v else (r or "invalid") for v, r in zip(valid, got["invalid_reason"], strict=True)]
        return pd.DataFrame(
            {
                "valid": valid,
                "invalid_reason": pd.array(why, dtype="string"),
                "reward": reward,
                "correct": np.array([np.nan if v is None else float(v) for v in got["correct"]]),
                "claims": numbers("claims"),
                "unsupported_claims": numbers("unsupported_claims"),
                "supported_claims": numbers("supported_claims"),
            },
            index=samples.index,
        )


ENVIRONMENT = OpenEnv()
