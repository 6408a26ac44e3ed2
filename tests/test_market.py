"""The market environment: states without look-ahead, outcomes, formats, features, splits."""

import numpy as np
import pandas as pd
import pytest

from conftest import tiny_config
from hitchhiker import config
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import get
from hitchhiker.environments.market import hallucination, headlines, prompts
from hitchhiker.environments.market import states as states_mod


def _prices(n_days=400, tickers=("AAPL", "MSFT", "KO"), seed=1):
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2016-01-01", periods=n_days)
    closes = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, (n_days, len(tickers))), axis=0))
    wide = pd.DataFrame(closes, index=dates, columns=list(tickers))
    return wide.rename_axis("date").reset_index().melt(id_vars="date", var_name="ticker", value_name="close")


def _cfg():
    cfg = tiny_config()
    cfg["states"].update(
        train={"start": "2016-01-01", "end": "2016-09-30", "max_states": 1000},
        test={"start": "2016-11-01", "end": "2017-06-30", "max_states": 1000},
    )
    return config.validate(cfg)


def _count(texts):
    return np.array([len(t.split()) for t in texts])


def _fits(texts, budget):
    return _count(texts.to_pylist()) <= budget  # make_states passes Arrow strings


def test_states_never_see_prices_after_their_decision_date():
    cfg = _cfg()
    prices = _prices()
    states, _ = get("market").make_states(prices, cfg, _fits)
    cut = states["date"].sort_values().iloc[len(states) // 2]
    shocked = prices.copy()
    later = shocked["date"] > cut
    shocked.loc[later, "close"] *= np.random.default_rng(0).uniform(0.5, 1.5, later.sum())
    again, _ = get("market").make_states(shocked, cfg, _fits)
    before = states[states.date <= cut].set_index("state_id")
    assert len(before) > 20
    assert set(before.index) <= set(again.state_id)  # same content hash => same prompt
    pd.testing.assert_series_equal(before.prompt, again.set_index("state_id").loc[before.index].prompt)


def test_outcomes_are_forward_returns_and_train_respects_the_embargo():
    cfg = _cfg()
    prices = _prices()
    states, outcomes = get("market").make_states(prices, cfg, _fits)
    wide = prices.pivot(index="date", columns="ticker", values="close")
    days = list(wide.index)
    h = cfg["states"]["horizon"]
    merged = states.merge(outcomes, on="state_id", suffixes=("", "_o"))
    for row in merged.sample(20, random_state=0).itertuples():
        i = days.index(row.date)
        expect = [wide[t].iloc[i + h] / wide[t].iloc[i] - 1 for t in row.tickers]
        assert row.forward_returns == pytest.approx(expect)
        assert row.outcome_date == days[i + h]
    first_test = states[states.split == "test"].date.min()
    last_train_outcome = outcomes[outcomes.split == "train"].outcome_date.max()
    assert last_train_outcome <= first_test
    assert days.index(first_test) - days.index(states[states.split == "train"].date.max()) >= h


def test_pairs_are_unique_per_date_and_order_is_randomised():
    states, _ = get("market").make_states(_prices(), _cfg(), _fits)
    pairs = states[states.format == "pairwise"]
    keys = pairs.apply(lambda r: (r.date, frozenset(r.tickers)), axis=1)
    assert keys.is_unique
    firsts = pairs.tickers.map(lambda t: t[0])
    assert firsts.nunique() == 3  # every ticker appears in position A somewhere


def test_token_budget_trims_the_oldest_history_first():
    cfg = _cfg()
    full, _ = get("market").make_states(_prices(), cfg, _fits)
    budget = int(full.prompt.map(lambda p: _count([p])[0]).max()) - 3
    cfg["states"]["max_prompt_tokens"] = budget
    trimmed, _ = get("market").make_states(_prices(), cfg, _fits)
    assert trimmed.prompt.map(lambda p: _count([p])[0]).max() <= budget
    assert trimmed.history_days.min() < cfg["states"]["window"]
    row = trimmed[trimmed.history_days < cfg["states"]["window"]].iloc[0]
    same = np.array([tuple(t) == tuple(row.tickers) for t in full.tickers])
    long = full[(full.date == row.date).to_numpy() & same].iloc[0]
    kept = row.prompt.splitlines()[1].split()[-row.history_days :]
    assert long.prompt.splitlines()[1].split()[-row.history_days :] == kept


def test_budget_too_small_for_any_history_is_an_error():
    cfg = _cfg()
    cfg["states"]["max_prompt_tokens"] = 16
    with pytest.raises(HitchhikerError, match="max_prompt_tokens"):
        get("market").make_states(_prices(), cfg, _fits)


def test_synthetic_environment_plants_a_learnable_signal():
    cfg = _cfg()
    states, outcomes = get("synthetic").make_states(_prices(n_days=800), cfg, _fits)
    df = states.merge(outcomes[["state_id", "forward_returns"]], on="state_id")
    pair = df[df.format == "pairwise"]
    last = pair.prompt.map(lambda p: [h[-1] for h in prompts.section_returns(prompts.shown(p))])
    pick_bigger = [r[int(np.argmax(x))] for x, r in zip(last, pair.forward_returns, strict=True)]
    winner = [max(r) for r in pair.forward_returns]
    hit = np.mean(np.isclose(pick_bigger, winner))
    assert hit > 0.7  # a policy that reads the last return beats a coin flip by far


def _volume_prices(**kw):
    prices = _prices(**kw)
    prices["volume"] = np.random.default_rng(3).integers(1_000, 100_000, len(prices)).astype(float)
    return prices


def test_listwise_sets_are_unique_per_date_and_labelled_in_random_order():
    cfg = _cfg()
    cfg["market"]["states"].update(formats=["listwise"], list_size=3, per_date=None)
    tickers = ("AAPL", "MSFT", "KO", "JPM", "XOM")
    cfg["market"]["data"]["tickers"] = list(tickers)
    states, outcomes = get("market").make_states(_prices(tickers=tickers), cfg, _fits)
    keys = [(d, frozenset(t)) for d, t in zip(states.date, states.tickers, strict=True)]
    assert len(keys) == len(set(keys))
    assert states.groupby("date").size().max() == 10  # per_date null: all C(5, 3) sets
    assert {t[0] for t in states.tickers} == set(tickers)
    p = states.prompt.iloc[0]
    assert "A (" in p and "C (" in p and "D (" not in p and "Which of A, B and C" in p
    assert all(len(r) == 3 for r in outcomes.forward_returns)


def test_per_date_caps_the_sets_drawn_on_each_date():
    cfg = _cfg()
    cfg["market"]["states"]["per_date"] = 2
    states, _ = get("market").make_states(_prices(), cfg, _fits)
    assert states.groupby(["split", "format", "date"]).size().max() == 2


def test_large_universes_draw_distinct_sets_without_enumerating():
    rng = np.random.default_rng(0)
    dates, sets = states_mod._draw_sets(rng, n_dates=50, n_tickers=300, k=4, per_date=40)
    assert len(dates) == 50 * 40
    rows = {(d, *s) for d, s in zip(dates, sets, strict=True)}
    assert len(rows) == len(dates)  # no set twice on a date
    assert np.all(np.diff(sets, axis=1) > 0)  # no ticker twice in a set
    assert len(np.unique(sets)) > 250  # spread over the universe


def test_price_and_volume_features_render_and_pass_the_audit():
    cfg = _cfg()
    cfg["market"]["states"]["features"] = ["returns", "prices", "volume"]
    prices = _volume_prices()
    states, outcomes = get("market").make_states(prices, cfg, _fits)
    p = states.prompt.iloc[0]
    assert prompts.headers("daily")["prices"] in p and prompts.headers("daily")["volume"] in p
    shown = prompts.shown(p)
    assert set(shown) == {"returns", "prices", "volume"}
    assert all(v[-1] == 100.0 for v in shown["prices"].values())  # today's close is 100%
    assert all(abs(v.mean() - 100) < 0.05 for v in shown["volume"].values())  # percents, and the header says so
    assert "percent of its average" in prompts.SECTIONS["volume"]
    get("market").audit(prices, states, outcomes, cfg)
    with pytest.raises(HitchhikerError, match="no volume column"):
        get("market").make_states(_prices(), cfg, _fits)


def test_news_shows_only_headlines_up_to_the_decision_date():
    cfg = _cfg()
    prices = _prices()
    days = pd.bdate_range("2016-01-01", periods=400)
    news = pd.DataFrame(
        {"date": days, "ticker": np.resize(["AAPL", "MSFT", "KO"], 400), "headline": [f"story {i}" for i in range(400)]}
    )
    states, outcomes = get("market").make_states(prices, cfg, _fits, news=news)
    for row in states.sample(30, random_state=0).itertuples():
        lines = prompts.news_lines(row.prompt)
        assert 0 < len(lines) <= cfg["market"]["states"]["news_items"]
        assert all(pd.Timestamp(line[:10]) <= row.date for line in lines)
        assert all(line.split()[1].rstrip(":") in list(row.tickers) for line in lines)
    get("market").audit(prices, states, outcomes, cfg, news)
    bad = states.copy()
    bad.loc[0, "prompt"] = bad.prompt[0].replace(prompts.NEWS + "\n", prompts.NEWS + "\n2099-01-01 AAPL: late\n")
    with pytest.raises(HitchhikerError, match="headline dated after"):
        get("market").audit(prices, bad, outcomes, cfg, news)


def test_validation_split_sits_between_train_and_test_with_embargoes():
    cfg = _cfg()
    cfg["states"]["validation"] = {"start": "2016-10-01", "end": "2016-10-31", "max_states": 1000}
    cfg = config.validate(cfg)
    prices = _prices()
    states, outcomes = get("market").make_states(prices, cfg, _fits)
    assert set(states.split) == {"train", "validation", "test"}
    report = get("market").audit(prices, states, outcomes, cfg)
    assert report["train_to_validation"]["embargo_periods"] >= cfg["states"]["horizon"]
    assert report["validation_to_test"]["embargo_periods"] >= cfg["states"]["horizon"]
    out = outcomes.set_index("state_id").outcome_date
    for earlier, later in (("train", "validation"), ("validation", "test")):
        assert out[states[states.split == earlier].state_id].max() <= states[states.split == later].date.min()


def test_the_budget_check_agrees_with_exact_token_counts(base_run):
    from transformers import AutoTokenizer

    from hitchhiker import policy
    from hitchhiker.stages import build_states

    tok = AutoTokenizer.from_pretrained(base_run / "policy" / "round_0" / "model")
    texts = list(pd.read_parquet(base_run / "states.parquet").prompt)
    exact = np.array([len(tok(policy.chat(tok, t), add_special_tokens=False).input_ids) for t in texts])
    fits = build_states.budget_check(tok, chunk=7)
    for budget in (exact.min() - 1, int(np.median(exact)), exact.max(), exact.max() + 40, 10_000):
        assert np.array_equal(fits(texts, budget), exact <= budget)


@pytest.mark.parametrize(
    "reward", [{}, {"cost_bps": 10, "benchmark": "equal_weight"}, {"returns": "log", "benchmark": "equal_weight"}]
)
def test_every_action_is_priced_as_score_pays_its_answer(reward):
    cfg = _cfg()
    cfg["market"]["states"]["formats"] = ["elementwise", "pairwise", "listwise"]
    cfg["market"]["data"]["tickers"] = ["AAPL", "MSFT", "KO", "JPM", "XOM"]
    cfg["reward"] = {**cfg["reward"], **reward}
    env = get("market")
    states, outcomes = env.make_states(_prices(tickers=cfg["market"]["data"]["tickers"]), cfg, _fits)
    priced = env.action_rewards(outcomes, cfg["reward"])
    sizes = priced.groupby("state_id").size()
    expect = outcomes.set_index("state_id")["tickers"].map(lambda t: 3 if len(t) == 1 else len(t))  # long/flat/short
    assert len(sizes) == len(outcomes) and (sizes == expect.reindex(sizes.index)).all()
    assert set(outcomes["format"]) == {"elementwise", "pairwise", "listwise"}
    # the same actions written as answers, with a rationale, scored by the stage's own method
    samples = pd.DataFrame({"state_id": priced["state_id"], "completion": priced["action"] + " because it rose"})
    samples["answers"] = samples["completion"].map(lambda c: [c])
    scored = env.score(samples, states, outcomes, cfg["reward"])
    assert scored["valid"].all()
    np.testing.assert_allclose(priced["reward"], scored["reward"], rtol=0, atol=1e-12)
    # every label costs the same, so a state's best label is its best ticker
    best = priced.loc[priced.groupby("state_id")["reward"].idxmax()].set_index("state_id")
    several = outcomes[outcomes["format"] != "elementwise"].set_index("state_id")
    chosen = best.loc[several.index, "weights"].map(np.argmax)
    assert (chosen == several["forward_returns"].map(np.argmax)).all() and len(several) > 0


def _signal_file(path, shape="long", every=5, tickers=("AAPL", "MSFT", "KO")):
    """rating: on every ``every``-th day, the day's position plus the ticker's index / 10
    (so a shown value names the day it is dated); forecast: a random number, same days."""
    days = pd.bdate_range("2016-01-01", periods=400)[::every]
    rng = np.random.default_rng(0)
    rows = pd.DataFrame(
        [(d, t, i * every + j / 10, rng.normal(0, 0.01)) for i, d in enumerate(days) for j, t in enumerate(tickers)],
        columns=["date", "ticker", "rating", "forecast"],
    )
    if shape == "long":
        rows = rows.melt(id_vars=["date", "ticker"], var_name="name", value_name="value")
    rows.to_csv(path, index=False)
    return path


def _signal_cfg(path, names=("rating", "forecast")):
    cfg = _cfg()
    cfg["market"]["data"]["signals"], cfg["market"]["states"]["signals"] = str(path), list(names)
    return config.validate(cfg)


@pytest.mark.parametrize("shape", ["long", "wide"])
def test_signals_show_their_latest_value_up_to_the_decision_date_and_pass_the_audit(tmp_path, shape):
    cfg = _signal_cfg(_signal_file(tmp_path / "signals.csv", shape))
    prices = _prices()
    states, outcomes = get("market").make_states(prices, cfg, _fits)
    position = {d: i for i, d in enumerate(pd.bdate_range("2016-01-01", periods=400))}
    assert "Signals as of today's close:" in states.prompt.iloc[0]
    for row in states.itertuples():
        shown = prompts.shown(row.prompt)["signals"]
        for j, ticker in enumerate(row.tickers):
            rating, forecast = shown[ticker]
            dated = int(rating)  # the day the shown rating is dated: the latest rating day up to T
            assert dated <= position[row.date] < dated + 5
            assert rating == row.signal_rating[j] and forecast == row.signal_forecast[j]
    get("market").audit(prices, states, outcomes, cfg)
    # a shown signal value is a supported figure, another is not, and a signal's name is no unknown ticker
    row = states[states.format == "pairwise"].iloc[0]
    cited = f"A because its rating {row.signal_rating[0]:.4g} is higher"
    assert hallucination.count(cited, row.prompt, row.tickers) == 0
    assert (
        hallucination.count(f"A because its rating {row.signal_rating[0] + 0.5:.4g} is higher", row.prompt, row.tickers)
        == 1
    )

    late = states.copy()
    late["signal_rating"] = late.signal_rating.map(lambda v: [x + 5 for x in v])  # the next rating day's
    with pytest.raises(HitchhikerError, match=r"signal_rating is \[.*, but the latest values of rating in .*"):
        get("market").audit(prices, late, outcomes, cfg)
    ahead = states.copy()
    first = prompts.shown(ahead.prompt[0])["signals"][ahead.tickers[0][0]][0]
    ahead.loc[0, "prompt"] = ahead.prompt[0].replace(f"rating {first:.4g}", f"rating {first + 5:.4g}", 1)
    with pytest.raises(HitchhikerError, match="signals in the prompt are not their latest values"):
        get("market").audit(prices, ahead, outcomes, cfg)


def test_each_signal_is_a_baseline_all_on_its_highest_value(tmp_path):
    cfg = _signal_cfg(_signal_file(tmp_path / "signals.csv"))
    states, outcomes = get("market").make_states(_prices(), cfg, _fits)
    rows = get("market").baselines(
        states, outcomes, {"benchmark": "none", "cost_bps": 0, "invalid_penalty": -0.05, "returns": "simple"}
    )
    got = rows[rows.baseline == "higher_forecast"].set_index("state_id").reward
    fwd = outcomes.set_index("state_id").forward_returns
    for s in states.itertuples():
        f, r = np.asarray(s.signal_forecast), np.asarray(fwd[s.state_id])
        # by hand: all on the highest forecast; one ticker: long if the forecast is positive, else short
        want = r[np.argmax(f)] if len(f) > 1 else np.sign(f[0]) * r[0] if f[0] != 0 else -r[0]
        assert got[s.state_id] == pytest.approx(want)
    assert {"higher_rating", "higher_forecast", "momentum"} <= set(rows.baseline)


@pytest.mark.parametrize("shape", ["long", "wide"])
def test_a_signal_file_without_market_states_signals_shows_each_of_its_signals_in_file_order(tmp_path, shape):
    path = _signal_file(tmp_path / "signals.csv", shape)
    if shape == "wide":  # a text column is no signal: not shown
        pd.read_csv(path).assign(note="text").to_csv(path, index=False)
    cfg = _signal_cfg(path, [])
    assert cfg["market"]["states"]["signals"] == ["rating", "forecast"]
    states, _ = get("market").make_states(_prices(), cfg, _fits)
    assert "rating " in states.prompt.iloc[0] and "forecast " in states.prompt.iloc[0]


def test_signal_errors_are_one_line_and_come_before_any_state(tmp_path):
    prices = _prices()
    signal_file = _signal_file(tmp_path / "signals.csv")
    cases = {
        "nowhere.csv": (["rating"], "config key market.data.signals: nowhere.csv does not exist"),
        str(signal_file): (
            ["rank"],
            "config key market.states.signals: 'rank' is not a signal of .* \\(it has: forecast, rating",
        ),
    }
    for path, (names, message) in cases.items():
        cfg = _signal_cfg(path, names)
        with pytest.raises(HitchhikerError, match=message):
            get("market").check_data(prices, cfg)
    text = tmp_path / "text.csv"
    text.write_text("date,ticker,rating\n2016-01-01,AAPL,4.5\n2016-01-04,MSFT,buy\n")
    with pytest.raises(HitchhikerError, match="rating of MSFT on 2016-01-04 is 'buy', not a finite number"):
        get("market").check_data(prices, _signal_cfg(text, ["rating"]))
    late = tmp_path / "late.csv"  # KO's first rating comes after the first decision dates
    pd.read_csv(signal_file).query("ticker != 'KO' or date > '2016-06-01'").to_csv(late, index=False)
    with pytest.raises(
        HitchhikerError, match=r"rating has no value for KO dated on or before 2016-.*of the train split"
    ):
        get("market").check_data(prices, _signal_cfg(late, ["rating"]))
    twice = tmp_path / "twice.csv"
    pd.concat([pd.read_csv(signal_file)] * 2).to_csv(twice, index=False)
    with pytest.raises(HitchhikerError, match="rating of AAPL has two values on 2016-01-01"):
        get("market").check_data(prices, _signal_cfg(twice, ["rating"]))
    half = _cfg()
    half["market"]["states"]["signals"] = ["rating"]
    with pytest.raises(HitchhikerError, match=r"market.states.signals is set but market.data.signals is not"):
        config.validate(half)
    sequential = _signal_cfg(signal_file, ["rating"])
    sequential.update(environment="sequential")
    sequential["market"]["states"]["formats"] = ["pairwise"]
    with pytest.raises(HitchhikerError, match=r"market.data.signals: the sequential environment shows no signals"):
        config.validate(sequential)


def test_a_headline_or_signal_stamped_with_a_time_of_day_is_refused(tmp_path):
    # a headline at 20:15 came after that day's close: its date alone showed it to that day's
    # decision, a day of look-ahead; without the exchange's close the time cannot be placed
    news = tmp_path / "news.csv"
    news.write_text("date,ticker,headline\n2016-03-04,AAPL,Earlier\n2016-03-04 20:15:00,AAPL,Results beat\n")
    with pytest.raises(
        HitchhikerError,
        match=r"news file .*news.csv: 2016-03-04 20:15:00 in row 2 has a time of day; date each headline",
    ):
        headlines.read(str(news))
    signal_file = tmp_path / "signals.csv"
    pd.DataFrame({"date": ["2016-01-04T16:30Z"], "ticker": "AAPL", "rating": 1.0}).to_csv(signal_file, index=False)
    with pytest.raises(
        HitchhikerError, match=r"signal file .*: 2016-01-04T16:30Z in row 1 has a time of day; date each value"
    ):
        get("market").check_data(_prices(), _signal_cfg(signal_file, ["rating"]))
    # midnight in any zone is a date: the day as written, as prices read it
    news.write_text("date,ticker,headline\n2016-03-04 00:00:00+09:00,AAPL,Tokyo\n2016-03-14 00:00,AAPL,Pi day\n")
    assert [f"{d:%Y-%m-%d}" for d in headlines.read(str(news)).date] == ["2016-03-04", "2016-03-14"]


def test_the_synthetic_market_says_its_closes_are_simulated():
    cfg = config.validate(tiny_config())
    assert get("market").describe_data(cfg) == "sample, the bundled data/sp500_dataset.csv.gz"
    synthetic = get("synthetic").describe_data(cfg)
    assert synthetic.startswith("sample, the bundled") and synthetic.endswith("the closes are simulated)")
    assert get("sequential").describe_data(cfg) == "sample, the bundled data/sp500_dataset.csv.gz"  # PriceData too
