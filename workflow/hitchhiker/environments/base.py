"""The base class of every environment: the methods the stages call, with defaults where
one makes sense. A new environment subclasses it and writes four: fetch (its data),
make_states, audit and score; everything else has a default (one decision per state, no
claims checked, no baselines, no action priced, no metrics of its own, a tokenizer corpus
from its practice turns). environments/weather.py is the template.

Frames are pandas; the data table has a date column and the environment's own; a state is
one row of the states table (state_id, split, format, date, horizon, prompt, plus what the
environment adds: the market's tickers), an outcome one row of the outcomes table
(state_id, split, format, outcome_date, plus what the environment adds: the market's
tickers and forward_returns). Example::

    env = environments.get("market")
    prices, log_lines = env.fetch(cfg)
    states, outcomes = env.make_states(prices, cfg, fits)
    env.audit(prices, states, outcomes, cfg)                 # raises on leakage
    scored = env.score(samples, states, outcomes, cfg["reward"])
    table = env.baselines(states, outcomes, cfg["reward"], train=states[states.split == "train"])
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitchhiker.cli import HitchhikerError


class Environment:
    name: str = "environment"

    @property
    def config_key(self) -> str:
        """The top-level config key of the environment's own section."""
        return self.section or self.name

    # the figures summarize draws for it besides the learning curve and the invalid answers:
    # results/<run>/<name>.png each, with its caption in workflow/report/<name>.rst
    plots: tuple[str, ...] = ()
    # what a reward is counted in, for the headline table's and the learning curve's labels
    reward_unit: str = ""
    # whether a decision is a position whose reward is a return on the capital it held: then
    # evaluate and summarize add the Sharpe ratio and maximum drawdown of the portfolio the
    # decisions induce (metrics.decision_stats)
    positions: bool = False
    # whether score reads what a reason argues (REASON's columns: consistency with the answer,
    # support in the prompt): what evaluate reports as the reason's consistency and what
    # grounding.reason_bonus pays for
    reads_reasons: bool = False
    # the JSON schema of the environment's own config section (defaults and a description per
    # key, as in the shared schema; None: no section), and its top-level key: the environment's
    # name unless ``section`` names a family's (the market's three share "market")
    config_schema: dict | None = None
    section: str | None = None
    # keys a config may still spell as they were, and where they now live: a one-line "config
    # key data.tickers is now market.data.tickers" instead of "unknown config key"
    moved: dict[str, str] = {}  # noqa: RUF012 (read, never changed)
    # whether states.<split>.start and end choose the decision dates (not where a remote server
    # deals the episodes): build_states then says where a split's dates run past the data's
    dated_splits: bool = True
    # its data step (the fetch_prices rule) writes results/<run>/<data_name>.parquet, a table
    # with at least these columns (build_states and audit refuse one without them)
    data_name: str = "data"
    data_columns: tuple[str, ...] = ("date",)
    # the columns of the states and outcomes tables that evaluate joins to each scored answer
    # for answer_metrics and draw_plots (besides state_id, date and format)
    state_columns: tuple[str, ...] = ()
    outcome_columns: tuple[str, ...] = ()

    # -- required: what every environment writes ----------------------------------------

    def fetch(self, cfg: dict) -> tuple[pd.DataFrame, list[str]]:
        """The data table the states are built from (a date column and the environment's
        own), checked and cleaned, and lines for the data step's log saying what was read
        and what was done to it. Bad data raises HitchhikerError in one line."""
        raise NotImplementedError(f"the {self.name} environment has no fetch")

    def make_states(self, prices: pd.DataFrame, cfg: dict, fits) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(states, outcomes) for every configured split from the data table (what fetch
        wrote), and any file of state_files. ``fits(texts, budget) -> bool array`` says
        whether each rendered user message, chat-templated, has at most ``budget`` tokens. A
        prompt may show nothing dated after its state's date; the outcome is what follows
        it. Deterministic given cfg["seed"]."""
        raise NotImplementedError(f"the {self.name} environment has no make_states")

    def audit(self, prices: pd.DataFrame, states: pd.DataFrame, outcomes: pd.DataFrame, cfg: dict) -> dict:
        """Re-derive every state and outcome from the data up to its date; raise
        HitchhikerError naming the first state that differs. Returns the report audit.json
        holds: at least states_checked and frequency (frequency.FREQUENCIES' names), and
        period, the word for one row, where the frequency's ("trading day" for daily) is not it."""
        raise NotImplementedError(f"the {self.name} environment has no audit")

    def score(
        self, samples: pd.DataFrame, states: pd.DataFrame, outcomes: pd.DataFrame, reward_cfg: dict
    ) -> pd.DataFrame:
        """Per sample row (state_id, completion, answers: the model's text per turn), indexed
        like ``samples``: valid, invalid_reason, reward (the environment's dollar reward,
        invalid answers at reward.invalid_penalty), claims (every claim its text makes,
        supported or not), unsupported_claims (those the state does not support, what the
        grounding penalty charges),
        supported_claims (those it supports, what the supported-claim bonus pays), and the
        environment's own columns (the market's: action, weights, ranking, correct,
        preference, a count per kind of claim). ``correct`` (1, 0 or NaN), where given, is
        reported as accuracy. Where the environment reads what a reason argues (REASON's
        columns): reason_consistency (1 where the reason argues for the answer given, -1
        where for another, 0 where it argues for none, NaN for an invalid answer) and
        reason_supported (1 where every statement the argument rests on holds in the prompt,
        0 where one does not, NaN where there is none). Never raises on a completion."""
        raise NotImplementedError(f"the {self.name} environment has no score")

    # -- optional, with defaults: its config and data ------------------------------------

    def check_config(self, cfg: dict) -> None:
        """Raise HitchhikerError (one line naming the key) for a config this environment
        cannot run; ``cfg`` may hold only the sections a stage reads. Called by
        config.validate. Default: every config the schema accepts."""

    def check_data(self, prices: pd.DataFrame, cfg: dict) -> None:
        """Raise HitchhikerError (one line) if the cleaned data table cannot make the
        configured states, e.g. a split with no decision date; called before any job runs.
        Default: no check beyond the schema's."""

    def state_files(self, cfg: dict) -> list[str]:
        """The files make_states and audit read besides the data table (the market's market.data.news
        and market.data.signals): the inputs of build_states and the audit. Default: none."""
        return []

    def data_files(self, cfg: dict) -> list[str]:
        """The files fetch reads: the data step's inputs, so that editing one reruns it.
        Default: none."""
        return []

    def describe_data(self, cfg: dict) -> str:
        """Where the data comes from, in words (the console's first line). Default: its files."""
        return ", ".join(self.data_files(cfg)) or "none"

    def preflight_data(self, cfg: dict) -> None:
        """Before any job runs: fetch the data and check_data it, so that a bad file or a
        split without dates stops the run in one line. Default: exactly that."""
        self.check_data(self.fetch(cfg)[0], cfg)

    # -- optional: episodes of several turns, every action priced ------------------------

    def next_turn(self, state, answers: list[str], reward_cfg: dict) -> str | None:
        """The environment's next user message after the model's ``answers`` so far in the
        episode of ``state``, or None when the episode is over. Default: one decision."""
        return None

    def action_rewards(self, outcomes: pd.DataFrame, reward_cfg: dict) -> pd.DataFrame:
        """Where the environment prices every action of a state (a market knows each ticker's
        forward return): one row per (state_id, action) with the action's answer text, its
        weights and the reward score would pay that answer; what train.objective
        full_information trains on. Default: none (a multi-turn environment, whose later
        turns depend on earlier actions, cannot price them)."""
        raise HitchhikerError(f"the {self.name} environment does not price every action of a state")

    def prices_actions(self) -> bool:
        """Whether this environment overrides action_rewards."""
        return type(self).action_rewards is not Environment.action_rewards

    def has_turns(self, cfg: dict | None = None) -> bool:
        """Whether an episode may hold several turns (this environment overrides next_turn;
        ``cfg``: the run's config, where that depends on it)."""
        return type(self).next_turn is not Environment.next_turn

    # -- optional: what evaluate and summarize report besides the shared metrics -----------

    def answer_metrics(self, scored: pd.DataFrame, block: int, seed: int) -> dict:
        """The environment's own metrics of one policy's scored answers in one decoding mode
        (with the states' and outcomes' columns joined), for metrics.json: each a mean with a
        block-bootstrap 95% interval over dates: metrics.block_bootstrap_ci with ``block``
        (block_length's, which the interval's widening assumes). Default: none."""
        return {}

    def paired_metrics(self, scored: pd.DataFrame, base: pd.DataFrame, horizon: int, stride: int, seed: int) -> dict:
        """The environment's own figures of one policy's scored answers (one round, one
        decoding mode, as answer_metrics gets them) minus the base policy's on the same
        states, for metrics.json's rates_minus_base: each a metrics.paired_difference-like
        dict (mean, ci95, n). Default: none."""
        return {}

    def claim_rates(self, scored: pd.DataFrame) -> pd.DataFrame:
        """Per scored answer: any_rate and one 0/1 column per claim kind (1 where the answer
        has one), unsupported_per_answer, and any measure that tells a fall in them from writing
        less (the market's: stating_figures_rate, supported_per_answer, completion_chars);
        evaluate and summarize report their means. Default: unsupported_claims as scored."""
        claims = scored["unsupported_claims"].astype(float)
        return pd.DataFrame({"any_rate": (claims > 0).astype(float), "unsupported_per_answer": claims})

    def counterfactual(self, states: pd.DataFrame, cfg: dict) -> pd.DataFrame | None:
        """A copy of the held-out ``states`` (same rows, same state_id) whose prompts are
        changed in a known direction, so that a policy that reads the evidence changes its
        decision in a known way (the market's pairwise: A and B swapped; the weather: today's
        rain flipped). evaluate answers both and reports the share of answers that follow
        (:meth:`follows`). Default: None (not measured)."""
        return None

    def follows(self, answered: pd.DataFrame, changed: pd.DataFrame, states: pd.DataFrame) -> pd.Series:
        """Per pair of scored answers (the answer to a state and the answer to its changed
        copy, drawn in the same mode and sample, indexed alike, each with its state_id;
        ``states`` the changed copies, as counterfactual gave them):
        1.0 where the changed decision moved as the change says a reader's would, 0.0 where
        not, NaN where either answer is invalid. Needed with :meth:`counterfactual`."""
        raise NotImplementedError(f"the {self.name} environment changes prompts but says not what follows")

    def baselines(
        self, states: pd.DataFrame, outcomes: pd.DataFrame, reward_cfg: dict, train: pd.DataFrame
    ) -> pd.DataFrame:
        """Simple rules on the same states, rewarded as the policy: one row per (baseline,
        state) with baseline, state_id, date, reward. ``train``, the train split's states (and
        the outcomes' train rows), is all a rule may be fitted on. Default: none."""
        return pd.DataFrame(columns=["baseline", "state_id", "date", "reward"])

    def draw_plots(self, preds: pd.DataFrame, rounds: list[dict], baselines: pd.DataFrame, cfg: dict) -> dict:
        """A matplotlib figure per name in ``plots``, from every round's predictions (round,
        mode and the scored columns), each round's metrics.json and the baselines' rows
        (one per baseline and state, with reward and date). Default: none."""
        return {}

    # -- only for the tiny test model's format warm-up (policy.py) ----------------------

    # the tiny model's format warm-up answers each practice turn with every valid first word
    # and one of these reasons, drawn at random
    practice_reasons: tuple[str, str] = ("because of the recent data.", "because of the last days.")

    def practice_turn(self, cfg: dict, rng: np.random.Generator, i: int) -> tuple[str, list[str]]:
        """The i-th practice prompt on random data, drawn from ``rng``, and every valid first
        word of an answer to it (the tiny model's format warm-up, model.tiny.format_warmup_steps)."""
        raise HitchhikerError(
            f"config key model.tiny.format_warmup_steps: the {self.name} environment has no practice turns"
        )

    def corpus(self, cfg: dict, seed: int) -> list[str]:
        """Texts (prompts and answers) to train the tiny model's tokenizer on. Default: 200
        practice turns and their answers, or, without practice turns, no text (the
        tokenizer keeps its alphabet of printable characters)."""
        if type(self).practice_turn is Environment.practice_turn:
            return []
        rng = np.random.default_rng(seed)
        texts = []
        for i in range(200):
            prompt, words = self.practice_turn(cfg, rng, i)
            texts += [prompt, *(f"{w} because" for w in words)]
        return texts


# the columns every environment's score returns besides its own; score and evaluate compute
# with all but invalid_reason, so they must be numbers (valid a bool or a 0/1)
SCORED = ("valid", "invalid_reason", "reward", "claims", "unsupported_claims", "supported_claims")
# the columns an environment that reads what a reason argues adds (score's docstring); numbers too
REASON = ("reason_consistency", "reason_supported")


def check_scored(env: Environment, scored, samples: pd.DataFrame) -> pd.DataFrame:
    """``scored``, what ``env.score`` returned for ``samples``, if it keeps score's contract;
    else HitchhikerError, in one line, naming what it breaks. A new environment's bug is found
    here rather than as a traceback deep in a stage, or as answers silently joined to the wrong
    samples: a frame indexed like the samples, SCORED's columns (numbers where the stages
    compute), none of the samples' own columns again, and each column of one type (the buffer
    and the predictions store one type a column)."""
    import pyarrow as pa  # here: loaded by then, with pandas, in both stages that call this

    what = f"the {env.name} environment's score"
    if not isinstance(scored, pd.DataFrame):
        raise HitchhikerError(f"{what} returned a {type(scored).__name__}, not a pandas DataFrame")
    if not scored.index.equals(samples.index):
        raise HitchhikerError(
            f"{what} returned {len(scored)} rows not indexed like its {len(samples)} samples (index=samples.index)"
        )
    missing = [c for c in SCORED if c not in scored.columns]
    if missing:
        raise HitchhikerError(f"{what} returned no column(s) {', '.join(missing)} (base.py: SCORED)")
    again = [c for c in scored.columns if c in samples.columns]
    if again:
        raise HitchhikerError(f"{what} returned the samples' own column(s) {', '.join(map(str, again))} again")
    for name in (*SCORED, *(c for c in REASON if c in scored)):
        if name != "invalid_reason" and not pd.api.types.is_numeric_dtype(scored[name]):
            raise HitchhikerError(f"{what}: column {name} is {scored[name].dtype}, not numbers")
    for name in scored.select_dtypes(include="object").columns:
        try:
            pa.array(scored[name], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
            raise HitchhikerError(f"{what}: column {name} does not hold one type ({err})") from None
    return scored
