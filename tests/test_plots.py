"""The figures a run draws, on hand-made metrics: a panel for each figure the environment
reports, a note where nothing could be drawn, the modes told apart, axes labelled."""

import math

import pandas as pd

from hitchhiker.environments.market import plots
from hitchhiker.stages import summarize


def _stat(mean):
    if mean is None:  # metrics.json's null: no valid answer to take it from
        return {"mean": math.nan, "ci95": [math.nan, math.nan]}
    return {"mean": mean, "ci95": [mean - 0.1, mean + 0.1]}


def _rounds(keys, valid=True):
    out = []
    for r in (0, 1):
        mode = {k: _stat(0.5 if valid else None) for k in keys}
        mode["valid_rate"] = _stat(0.5 + 0.1 * r if valid else 0.0)
        out.append({"round": r, "greedy": dict(mode), "sampled": dict(mode)})
    return out


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def test_the_learning_curve_has_a_panel_per_reported_figure_and_says_where_none_was_drawn():
    weather = summarize.learning_curve(_rounds(["accuracy", "mean_reward"]))  # no rank IC
    assert [ax.get_title() for ax in weather.axes] == ["valid answers", "accuracy (valid answers)",
                                                        "mean reward per decision ($)"]  # fmt: skip
    market = summarize.learning_curve(_rounds(["accuracy", "rank_ic", "mean_reward"], valid=False))
    empty = [ax.get_title() for ax in market.axes if "no valid answers\nin any round" in _texts(ax)]
    assert empty == ["accuracy (valid answers)", "rank IC (valid answers)", "mean reward per decision ($)"]
    greedy, sampled = market.axes[0].get_lines()[:2]
    assert (greedy.get_linestyle(), greedy.get_marker()) != (sampled.get_linestyle(), sampled.get_marker())


def test_the_equity_curves_have_a_date_axis_and_the_calibration_says_when_it_has_no_forecast():
    dates = pd.to_datetime(["2020-01-02", "2020-01-09", "2020-01-16", "2020-01-23"])
    preds = pd.DataFrame({"round": [0] * 4 + [1] * 4, "mode": "greedy", "date": [*dates, *dates],
                          "valid": True, "reward": [0.01, -0.02, 0.03, 0.0] * 2})  # fmt: skip
    base = pd.DataFrame({"baseline": "random", "date": dates, "valid": True, "reward": [0.0, 0.01, -0.01, 0.02]})
    rounds = [{"round": 0}, {"round": 1}]
    fig = plots.equity_curves(preds, rounds, base, horizon=5, stride=5)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "decision date"
    styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines()}
    assert styles["round 1"] != styles["random"]
    none = [{"round": r, "greedy": {"calibration": []}, "sampled": {"calibration": []}} for r in (0, 1)]
    cal = plots.calibration(none)
    assert all("no valid answer to read\nas a forecast" in _texts(a) for a in cal.axes)
    assert all(a.get_legend() is None for a in cal.axes)
