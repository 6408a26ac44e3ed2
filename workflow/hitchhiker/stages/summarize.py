"""summarize: the run's headline table, baselines, paired differences and plots.

Reads every round's evaluation and scores simple baselines (random, always first,
equal weight, momentum, mean reversion; see the environment's ``baselines``) on the same
test states. Writes metrics.json:
  rounds               each policy's metrics (round 0 = base), greedy and sampled
  baselines            the same statistics for each baseline
  reward_minus_base    each trained round minus the base policy, paired state by state
  reward_minus_baseline  the last round minus each baseline, paired state by state
  rollout_groups       per round, what its rollout's groups held to learn from
                       (buffer.group_stats: the share without reward spread, the first
                       word's entropy, the most common first word and its share)
  rates_minus_base     each trained round minus the base policy in the valid rate, in
                       accuracy and rank IC (where the environment has them) and in each
                       hallucination rate (any kind, then each) and in the template and
                       no-reason rates, the consistency of the reason and the following of
                       changed evidence where measured (rationales.py), paired state by state
                       (rank IC of elementwise answers: date by date)
every mean with a 95% block-bootstrap interval over decision dates; learning_curve.png
(valid rate, accuracy, rank IC, mean reward per round, with intervals; and, per policy, the
share of the groups it sampled that had no reward spread and its most common first word's
share), invalid_answers.png
(invalid answers by reason, per round) and the environment's own plots (its ``plots``,
drawn by its draw_plots: the market's equity_curves.png and calibration.png).

and headline.csv, the table the console ends on (per round and mode: valid rate,
accuracy, mean reward, unsupported claims per answer, the template share and, where the
environment measures them, the share of reasons that argue for the answer given and of
decisions that follow a changed prompt, with intervals, and the mean reward's paired
difference to the base).

Usage:
  python -m hitchhiker.stages.summarize --config config.yaml --states results/default/states.parquet \\
      --outcomes results/default/outcomes.parquet \\
      --predictions results/default/eval/round_*/predictions.parquet \\
      --metrics results/default/eval/round_*/metrics.json --buffer results/default/buffer/round_<last>.duckdb \\
      --out-json results/default/metrics.json \\
      --out-plot results/default/learning_curve.png --out-invalid results/default/invalid_answers.png \\
      --out-env-plots results/default/equity_curves.png results/default/calibration.png \\
      --out-headline results/default/headline.csv
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from hitchhiker import artifacts, atomic, buffer, cli, config, environments, frequency, rationales
from hitchhiker.metrics import (
    block_bootstrap_ci,
    block_length,
    decision_stats,
    interval_text,
    paired_difference,
)

SECTIONS = ["run", "seed", "environment", "states", "reward"]
MODES = ("greedy", "sampled")


def per_state(preds: pd.DataFrame, round_: int, mode: str, column: str = "reward") -> pd.Series:
    """Mean of ``column`` per (state, date) of one policy and decoding mode."""
    part = preds[(preds["round"] == round_) & (preds["mode"] == mode)]
    return part.groupby(["state_id", "date"])[column].mean()


def paired_rates(preds: pd.DataFrame, env, round_: int, h: int, stride: int, seed: int) -> dict:
    """Round ``round_`` minus the base policy, state by state, in the valid rate, in accuracy
    where the environment says what is right (over the states where both policies gave a
    decided answer; ``n`` counts them), in the environment's own paired figures (its
    paired_metrics: the market's rank IC, per state, or per date for elementwise answers) and
    in each hallucination rate (the share of answers with a claim of that kind, and the
    claims per answer) and in the template and no-reason rates (rationales.py: each policy's
    template is its own most common reason)."""
    rates = env.claim_rates(preds)
    by_policy = preds.groupby(["round", "mode"])
    rates = rates.join(pd.concat([rationales.indicators(part) for _, part in by_policy]))
    preds = pd.concat([preds, rates], axis=1).assign(valid_rate=preds["valid"].astype(float))
    accuracy = ["accuracy"] if "correct" in preds else []
    preds = preds.assign(accuracy=preds["correct"]) if accuracy else preds
    out = {}
    for mode in MODES:
        out[mode] = {}
        for column in ["valid_rate", *accuracy, *rates.columns]:
            cur, base = per_state(preds, round_, mode, column), per_state(preds, 0, mode, column)
            out[mode][column] = paired_difference(cur, base, cur.index.get_level_values("date"), h, stride, seed)
        cur, base = (preds[(preds["mode"] == mode) & (preds["round"] == r)] for r in (round_, 0))
        out[mode] |= env.paired_metrics(cur, base, h, stride, seed)  # the market's: rank IC
    return out


def headline(summary: dict, unit: str = "$") -> pd.DataFrame:
    """The run's headline table: per round and mode, the valid rate, accuracy (where the
    environment scores one), mean reward and unsupported claims per answer, each with its
    95% interval, and the mean reward's paired difference to the base policy; ``unit`` is
    the environment's reward_unit."""
    rows = []
    for m in summary["rounds"]:
        for mode in MODES:
            s = m.get(mode)
            if not s:
                continue
            rows.append(
                {
                    "round": m["round"],
                    "mode": mode,
                    "valid": interval_text(s.get("valid_rate"), ".0%"),
                    "accuracy": interval_text(s.get("accuracy"), ".2f"),
                    f"mean reward {unit}".strip(): interval_text(s.get("mean_reward"), "+.4f"),
                    "claims per answer": interval_text(s.get("hallucination", {}).get("unsupported_per_answer"), ".2f"),
                    "template share": interval_text(s.get("reasons", {}).get("template_rate"), ".0%"),
                    "consistent reason": interval_text(s.get("reasons", {}).get("consistent_rate"), ".0%"),
                    "follows changed evidence": interval_text(s.get("reasons", {}).get("follows_rate"), ".0%"),
                    f"reward - base {unit}".strip(): interval_text(
                        summary["reward_minus_base"].get(f"round_{m['round']}", {}).get(mode), "+.4f"
                    ),
                }
            )
    table = pd.DataFrame(rows)
    return table.loc[:, (table != "").any()]  # no empty column (an environment without accuracy)


def save(fig, path) -> None:
    """A figure as a PNG, written atomically, then closed."""
    with atomic.path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


# the two decoding modes apart even where their lines coincide (greedy often equals sampled)
STYLES = {"greedy": ("tab:blue", "o-", 7), "sampled": ("tab:orange", "s--", 4)}


def _interval_plot(ax, xs, stats, mode) -> bool:
    """One mode's means and 95% intervals by round; False where no round has a mean."""
    # metrics.json writes an undefined figure (no valid answer to take it from) as null
    mean, lo, hi = np.array([[s["mean"], *s["ci95"]] for s in stats], dtype=float).T
    color, style, size = STYLES[mode]
    ax.plot(xs, mean, style, color=color, label=mode, markersize=size)
    ax.fill_between(xs, lo, hi, color=color, alpha=0.2)
    return bool(np.isfinite(mean).any())


def learning_curve(rounds: list[dict], unit: str = "$", groups: pd.DataFrame | None = None):
    """Per round, each headline figure with its interval, one panel a figure the environment
    reports; with ``groups`` (buffer.group_stats), a last panel of what each policy's rollout
    gave GRPO to learn from (round r's groups were sampled by policy r - 1)."""
    titles = {
        "valid_rate": "valid answers",
        "accuracy": "accuracy (valid answers)",
        "rank_ic": "rank IC (valid answers)",
        "mean_reward": f"mean reward per decision{f' ({unit})' if unit else ''}",
    }
    titles = {k: v for k, v in titles.items() if k in rounds[0]["greedy"]}  # accuracy: where the environment says
    xs = [m["round"] for m in rounds]
    panels = len(titles) + (groups is not None)
    fig, axes = plt.subplots(1, panels, figsize=(3.75 * panels, 3.5), squeeze=False)
    for ax, (key, title) in zip(axes[0], titles.items(), strict=False):
        drawn = [_interval_plot(ax, xs, [m[mode][key] for m in rounds], mode) for mode in MODES]
        if not any(drawn):
            ax.text(0.5, 0.5, "no valid answers\nin any round", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        ax.set_xlabel("round (0 = base model)")
        ax.set_xticks(xs)
    axes[0][0].legend()
    if groups is not None:
        ax, sampler = axes[0][-1], groups["round"] - 1
        ax.plot(sampler, groups["zero_spread"], "o-", color="C3", label="groups without reward spread")
        if groups["top_action_share"].notna().any():
            ax.plot(sampler, groups["top_action_share"], "s--", color="C2", label="most common first word")
        ax.set_ylim(0, 1.05)
        ax.set_title("rollout groups (share)")
        ax.set_xlabel("policy that sampled them (round)")
        ax.set_xticks(xs)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_learning_curve(rounds: list[dict], path, unit: str = "$", groups: pd.DataFrame | None = None) -> None:
    save(learning_curve(rounds, unit, groups), path)


def plot_invalid(rounds: list[dict], path) -> None:
    reasons = sorted({r for m in rounds for mode in MODES for r in m[mode]["invalid_reasons"]})
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    for ax, mode in zip(axes, MODES, strict=True):
        bottom = np.zeros(len(rounds))
        for reason in reasons:
            share = np.array([m[mode]["invalid_reasons"].get(reason, 0) / m[mode]["n"] for m in rounds])
            ax.bar([m["round"] for m in rounds], share, bottom=bottom, label=reason)
            bottom += share
        ax.set_title(f"{mode}: invalid answers by reason")
        ax.set_xlabel("round (0 = base model)")
        ax.set_xticks([m["round"] for m in rounds])
    axes[0].set_ylabel("share of answers")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    save(fig, path)


def _read_rounds(metrics: list[str], predictions: list[str]) -> tuple[list[dict], pd.DataFrame]:
    """Every round's metrics (sorted by round) and predictions (one table): each round given
    once in each, the same rounds in both, round 0 among them; else a one-line error."""
    rounds, where = [], {}
    for path in metrics:
        m = artifacts.read_json(path, ["round", *MODES])
        if m["round"] in where:
            raise cli.HitchhikerError(f"--metrics: round {m['round']} in both {where[m['round']]} and {path}")
        where[m["round"]] = path
        rounds.append(m)
    if 0 not in where:
        raise cli.HitchhikerError("summarize needs the base policy's (round 0) metrics")
    frames, seen = [], {}
    for path in predictions:
        frames.append(artifacts.read_parquet(path, artifacts.PREDICTIONS))
        for r in frames[-1]["round"].unique().tolist():
            if r in seen:
                raise cli.HitchhikerError(f"--predictions: round {r} in both {seen[r]} and {path}")
            seen[r] = path
    if sorted(seen) != sorted(where):
        raise cli.HitchhikerError(
            f"--predictions hold rounds {', '.join(map(str, sorted(seen)))}, --metrics rounds "
            f"{', '.join(map(str, sorted(where)))}: give both for the same rounds"
        )
    return sorted(rounds, key=lambda m: m["round"]), pd.concat(frames, ignore_index=True)


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--states", required=True)
    p.add_argument("--outcomes", required=True)
    p.add_argument("--predictions", nargs="+", required=True)
    p.add_argument("--metrics", nargs="+", required=True)
    p.add_argument("--buffer", help="the last round's replay buffer: what each round's groups held to learn from")
    p.add_argument("--out-json", required=True)
    p.add_argument("--out-plot", required=True)
    p.add_argument("--out-env-plots", nargs="*", default=[], help="the environment's plots, each <name>.png")
    p.add_argument("--out-invalid", required=True)
    p.add_argument("--out-headline", required=True, help="the headline table (CSV)")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    env = environments.get(cfg["environment"])
    wanted = {Path(p).stem for p in args.out_env_plots}
    if wanted != set(env.plots):
        raise cli.HitchhikerError(
            f"--out-env-plots: the {cfg['environment']} environment draws {', '.join(env.plots) or 'no plots'}, "
            f"not {', '.join(sorted(wanted)) or 'none'}"
        )
    h, stride, seed = cfg["states"]["horizon"], cfg["states"]["stride"], cfg["seed"]
    rounds, preds = _read_rounds(args.metrics, args.predictions)
    states = artifacts.read_parquet(args.states, artifacts.STATES).set_index("state_id")
    outcomes = artifacts.read_parquet(args.outcomes, artifacts.OUTCOMES)
    for table, path in ((states.index, args.states), (outcomes["state_id"], args.outcomes)):
        unknown = set(preds["state_id"]) - set(table)
        if unknown:
            raise cli.HitchhikerError(f"{path} has no state {min(unknown)} of the predictions: is it this run's?")
    evaluated = states.loc[sorted(preds.state_id.unique())].reset_index()
    train = states[states["split"] == "train"].reset_index()  # what a baseline may be fitted on
    base_rows = env.baselines(evaluated, outcomes, cfg["reward"], train=train)
    outcome_dates = outcomes.set_index("state_id").outcome_date[evaluated.state_id]
    per_year = frequency.per_year(frequency.of_outcomes(evaluated.date, outcome_dates, h))
    baselines = {}
    for name, part in base_rows.groupby("baseline"):
        baselines[name] = decision_stats(part, h, stride, seed, per_year, env.positions)
        for column in part.columns.difference(["baseline", "state_id", "date", "reward"]):  # the environment's own
            mean, lo, hi = block_bootstrap_ci(part[column], part["date"], block_length(h, stride), seed)
            baselines[name][column] = {"mean": mean, "ci95": [lo, hi]}

    last = rounds[-1]["round"]
    base = {mode: per_state(preds, 0, mode) for mode in MODES}
    minus_base, minus_baseline = {}, {}
    rates_minus_base = {
        f"round_{m['round']}": paired_rates(preds, env, m["round"], h, stride, seed) for m in rounds[1:]
    }
    for m in rounds[1:]:
        minus_base[f"round_{m['round']}"] = {}
        for mode in MODES:
            cur = per_state(preds, m["round"], mode)
            minus_base[f"round_{m['round']}"][mode] = paired_difference(
                cur, base[mode], cur.index.get_level_values("date"), h, stride, seed
            )
    for mode in MODES:
        cur = per_state(preds, last, mode)
        minus_baseline[mode] = {}
        for name, part in base_rows.groupby("baseline"):
            other = part.set_index(["state_id", "date"])["reward"].loc[cur.index]
            minus_baseline[mode][name] = paired_difference(
                cur, other, cur.index.get_level_values("date"), h, stride, seed
            )
    summary = {
        "rounds": rounds,
        "baselines": baselines,
        "reward_minus_base": minus_base,
        "reward_minus_baseline": {"round": last, **minus_baseline},
        "rates_minus_base": rates_minus_base,
    }
    groups = buffer.group_stats(args.buffer, cfg["run"]) if args.buffer else None
    if groups is not None:
        summary["rollout_groups"] = groups.astype(object).where(groups.notna(), None).to_dict("records")
    artifacts.write_json(summary, args.out_json)
    plot_learning_curve(rounds, args.out_plot, env.reward_unit, groups)
    plot_invalid(rounds, args.out_invalid)
    figures = env.draw_plots(preds, rounds, base_rows, cfg)
    for path in args.out_env_plots:
        save(figures[Path(path).stem], path)

    table = headline(summary, env.reward_unit)
    artifacts.write_csv(table, args.out_headline)
    print(f"summarize: -> {args.out_json}, {args.out_headline}")
    print(table.to_string(index=False))


if __name__ == "__main__":
    cli.run(main)
