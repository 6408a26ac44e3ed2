"""The market's figures (Market.draw_plots; summarize saves them): the portfolio each
policy's decisions induce, and its weights read as forecasts.

equity_curves  growth of $1 invested as the base and the last round's greedy decisions say,
               against the baselines on the same states (metrics.portfolio_returns)
calibration    weights read as probabilities against what happened, base and last round
               (the bins evaluate stores under calibration in each round's metrics)
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from hitchhiker.metrics import held, portfolio_returns

MODES = ("greedy", "sampled")


def equity_curves(preds: pd.DataFrame, rounds: list[dict], baselines: pd.DataFrame, horizon: int, stride: int):
    last = rounds[-1]["round"]
    curves = {}
    for r in sorted({0, last}):
        g = preds[(preds["round"] == r) & (preds["mode"] == "greedy")]
        curves[f"round {r}" + (" (base)" if r == 0 else "")] = portfolio_returns(held(g), g.date, horizon, stride)
    for name, part in baselines.groupby("baseline"):
        curves[name] = portfolio_returns(held(part), part.date, horizon, stride)
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, returns in curves.items():
        # the policies solid, the base wide and pale beneath the last round (they often coincide),
        # the baselines thin and dotted
        policy, base = name.startswith("round"), name.endswith("(base)")
        ax.plot(
            returns.index,
            np.cumprod(1 + returns.to_numpy()),
            label=name,
            linewidth=5 if base else 2 if policy else 1.2,
            alpha=0.45 if base else 1.0,
            linestyle="-" if policy else ":",
        )
    ax.set_xlabel("decision date")
    ax.set_ylabel("equity ($1 at the start)")
    ax.set_title("portfolio induced by each policy's decisions on the test dates")
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def calibration(rounds: list[dict]):
    fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharey=True)
    for ax, mode in zip(axes, MODES, strict=True):
        ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle="--")
        for m in (rounds[0], rounds[-1]) if len(rounds) > 1 else rounds[:1]:
            table = m[mode].get("calibration")
            if table:
                ax.scatter(
                    [b["forecast"] for b in table],
                    [b["observed"] for b in table],
                    s=[10 + 2 * b["n"] for b in table],
                    alpha=0.6,
                    label=f"round {m['round']} (n={sum(b['n'] for b in table)})",
                )
        ax.set_title(f"{mode}: weight as a forecast")
        ax.set_xlabel("forecast probability (bin mean)")
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.05, 1.05)
        if ax.collections:
            ax.legend(fontsize=8)
        else:
            note = "no valid answer to read\nas a forecast"
            ax.text(0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes)
    axes[0].set_ylabel("observed frequency")
    fig.tight_layout()
    return fig
