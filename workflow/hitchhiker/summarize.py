"""summarize: the run's headline numbers and learning curve from every round's evaluation.

Writes metrics.json (each round's metrics, and the paired difference of every trained
round against the base policy on the same states, with a 95% date-bootstrap interval) and
learning_curve.png (valid rate, accuracy and mean reward per round, with intervals).

Usage:
  python -m hitchhiker.summarize --predictions results/default/eval/round_*/predictions.parquet \\
      --metrics results/default/eval/round_*/metrics.json --out-json results/default/metrics.json \\
      --out-plot results/default/learning_curve.png
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from hitchhiker import artifacts, cli, evaluate


def paired_difference(preds: pd.DataFrame, round_: int, mode: str) -> dict:
    """Mean reward of round ``round_`` minus the base policy's, state by state."""
    part = preds[preds["mode"] == mode]
    per_state = part.groupby(["round", "state_id", "date"])["reward"].mean().unstack("round")
    diff = per_state[round_] - per_state[0]
    mean, lo, hi = evaluate.bootstrap_ci(diff, diff.index.get_level_values("date").to_series(), seed=0)
    return {"mean": mean, "ci95": [lo, hi]}


def plot(rounds: list[dict], path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for ax, key, title in zip(
        axes,
        ("valid_rate", "accuracy", "mean_reward"),
        ("valid answers", "accuracy (valid answers)", "mean reward per decision ($)"),
        strict=True,
    ):
        for mode, color in (("greedy", "tab:blue"), ("sampled", "tab:orange")):
            xs = [m["round"] for m in rounds]
            mean = [m[mode][key]["mean"] for m in rounds]
            lo = [m[mode][key]["ci95"][0] for m in rounds]
            hi = [m[mode][key]["ci95"][1] for m in rounds]
            ax.plot(xs, mean, "o-", color=color, label=mode)
            ax.fill_between(xs, lo, hi, color=color, alpha=0.2)
        ax.set_title(title)
        ax.set_xlabel("round (0 = base model)")
        ax.set_xticks([m["round"] for m in rounds])
    axes[0].legend()
    fig.tight_layout()
    with artifacts.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    p.add_argument("--predictions", nargs="+", required=True)
    p.add_argument("--metrics", nargs="+", required=True)
    p.add_argument("--out-json", required=True)
    p.add_argument("--out-plot", required=True)
    args = p.parse_args(argv)
    rounds = sorted((json.loads(Path(m).read_text()) for m in args.metrics), key=lambda m: m["round"])
    if rounds[0]["round"] != 0:
        raise cli.HitchhikerError("summarize needs the base policy's (round 0) metrics")
    preds = pd.concat([artifacts.read_parquet(f, artifacts.PREDICTIONS) for f in args.predictions], ignore_index=True)
    diffs = {
        f"round_{m['round']}": {mode: paired_difference(preds, m["round"], mode) for mode in ("greedy", "sampled")}
        for m in rounds[1:]
    }
    summary = {"rounds": rounds, "reward_minus_base": diffs}
    artifacts.write_json(summary, args.out_json)
    plot(rounds, args.out_plot)
    last = rounds[-1]["round"]
    d = diffs[f"round_{last}"]["greedy"]
    print(
        f"summarize: round {last} - base, greedy mean reward {d['mean']:+.4f} "
        f"[{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}] -> {args.out_json}"
    )


if __name__ == "__main__":
    cli.run(main)
