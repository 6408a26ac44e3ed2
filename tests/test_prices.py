"""Price tables with faults get their documented treatment (data.faults) or a one-line
error naming ticker, date and fault; the yfinance source normalises the real shapes of
yfinance.download output, caches per ticker and retries."""

import sys
import types

import numpy as np
import pandas as pd
import pytest

from conftest import stage, tiny_config, write_config
from hitchhiker import fetch_prices
from hitchhiker.cli import HitchhikerError

DAYS = pd.bdate_range("2016-01-04", periods=8)


def _table() -> pd.DataFrame:
    """A clean long table for AAPL and MSFT over DAYS."""
    rows = [(d, t, 100.0 + i + (50 if t == "MSFT" else 0)) for i, d in enumerate(DAYS) for t in ("AAPL", "MSFT")]
    return pd.DataFrame(rows, columns=["date", "ticker", "close"])


def _policy():
    return {"unsorted": "sort", "duplicate": "error", "missing": "ffill", "ffill_limit": 2,
            "non_positive": "error", "ragged": "trim"}  # fmt: skip


def _clean(df, **faults):
    return fetch_prices.clean(df.reset_index(drop=True), {**_policy(), **faults}, need=2)


def _without(df, ticker, days):
    return df[~((df.ticker == ticker) & df.date.isin(days))]


def test_a_clean_table_passes_unchanged():
    out, notes = _clean(_table())
    pd.testing.assert_frame_equal(out, _table())
    assert notes == []


def test_unsorted_rows_are_sorted_or_refused():
    shuffled = _table().sample(frac=1, random_state=0)
    out, notes = _clean(shuffled)
    pd.testing.assert_frame_equal(out, _table())
    assert "sorted" in notes[0]
    with pytest.raises(HitchhikerError, match=r"price row \d+ \(\w+ on 2016-01-\d\d\) is out of"):
        _clean(shuffled, unsorted="error")


def test_identical_duplicates_are_dropped_and_disagreeing_ones_refused():
    df = pd.concat([_table(), _table().iloc[[3]]])
    out, notes = _clean(df, duplicate="drop")
    pd.testing.assert_frame_equal(out, _table())
    assert any("duplicate rows (identical closes): dropped" in n for n in notes)
    df.iloc[-1, 2] += 1
    with pytest.raises(HitchhikerError, match="duplicate price rows for MSFT on 2016-01-05 disagree"):
        _clean(df, duplicate="drop")


def test_gaps_are_forward_filled_within_the_limit_dropped_or_refused():
    df = _without(_table(), "AAPL", DAYS[2:4])  # two missing days inside AAPL's history
    out, notes = _clean(df)
    aapl = out[out.ticker == "AAPL"].set_index("date").close
    assert aapl[DAYS[2]] == aapl[DAYS[3]] == aapl[DAYS[1]] == 101.0
    assert "2 missing closes forward-filled, first AAPL on 2016-01-06" in notes[0]
    out, _ = _clean(df, missing="drop")
    assert set(out.date) == set(DAYS) - set(DAYS[2:4]) and len(out) == 12
    with pytest.raises(HitchhikerError, match="missing close for AAPL on 2016-01-06"):
        _clean(df, missing="error")
    with pytest.raises(HitchhikerError, match="missing closes for AAPL from 2016-01-06: a gap longer than"):
        _clean(_without(_table(), "AAPL", DAYS[2:5]))  # three days > ffill_limit 2


def test_an_empty_close_is_a_missing_close():
    df = _table()
    df.loc[(df.ticker == "MSFT") & (df.date == DAYS[4]), "close"] = np.nan
    out, _ = _clean(df)
    assert out.set_index(["date", "ticker"]).close[(DAYS[4], "MSFT")] == 153.0  # the day before's close


def test_non_positive_closes_are_refused_or_treated_as_missing():
    df = _table()
    df.loc[(df.ticker == "MSFT") & (df.date == DAYS[5]), "close"] = 0.0
    with pytest.raises(HitchhikerError, match=r"non-positive close 0\.0 for MSFT on 2016-01-11"):
        _clean(df)
    out, notes = _clean(df, non_positive="drop")
    assert out.set_index(["date", "ticker"]).close[(DAYS[5], "MSFT")] == 154.0
    assert "non-positive" in notes[0]


def test_listings_and_delistings_are_trimmed_dropped_or_refused():
    df = _table()
    df = pd.concat([df, pd.DataFrame({"date": DAYS[2:6], "ticker": "KO", "close": 40.0})])  # listed late, delisted
    out, notes = fetch_prices.clean(df.reset_index(drop=True), {**_policy(), "ragged": "trim"}, need=2)
    assert out.date.min() == DAYS[2] and out.date.max() == DAYS[5] and set(out.ticker) == {"AAPL", "MSFT", "KO"}
    assert "KO starts 2016-01-06" in notes[-1] and "a listing" in notes[-1]
    out, _ = fetch_prices.clean(df.reset_index(drop=True), {**_policy(), "ragged": "drop"}, need=2)
    assert set(out.ticker) == {"AAPL", "MSFT"} and len(out) == 16
    with pytest.raises(HitchhikerError, match="fewer than the 3 tickers"):
        fetch_prices.clean(df.reset_index(drop=True), {**_policy(), "ragged": "drop"}, need=3)
    with pytest.raises(HitchhikerError, match="ragged history: KO starts 2016-01-06"):
        fetch_prices.clean(df.reset_index(drop=True), {**_policy(), "ragged": "error"}, need=2)
    delisted = _without(_table(), "MSFT", DAYS[6:])
    with pytest.raises(HitchhikerError, match="MSFT ends 2016-01-11, before 2016-01-13 \\(a delisting\\)"):
        fetch_prices.clean(delisted.reset_index(drop=True), {**_policy(), "ragged": "error"}, need=2)


def test_the_cli_applies_the_policy_and_logs_it(tmp_path):
    df = _without(_table(), "AAPL", DAYS[3:4])
    df.to_csv(tmp_path / "p.csv", index=False)
    cfg = tiny_config(data={"source": "file", "path": str(tmp_path / "p.csv"), "tickers": ["AAPL", "MSFT"]})
    cfg["states"].update(window=2, horizon=1, train={"start": "2016-01-04", "end": "2016-01-06"},
                         test={"start": "2016-01-11", "end": "2016-01-13"})  # fmt: skip
    out = tmp_path / "prices.parquet"
    proc = stage("fetch_prices", "--config", write_config(tmp_path / "c.yaml", cfg), "--out", out)
    assert "1 missing closes forward-filled, first AAPL on 2016-01-07" in proc.stdout
    assert len(pd.read_parquet(out)) == 16
    cfg["data"]["faults"] = {"missing": "error"}
    proc = stage("fetch_prices", "--config", write_config(tmp_path / "c.yaml", cfg), "--out", out, check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "hitchhiker: error: missing close for AAPL on 2016-01-07 (data.faults.missing = error)"
    )


def _yf_frame(tickers, group_by="column", adjusted=True):
    """The shape yfinance.download returns in 0.2.5x: MultiIndex columns (field, ticker),
    or (ticker, field) with group_by="ticker"; "Adj Close" only without auto_adjust."""
    fields = ["Close", "High", "Low", "Open", "Volume"] + ([] if adjusted else ["Adj Close"])
    idx = pd.DatetimeIndex(DAYS, name="Date")
    cols = pd.MultiIndex.from_product([fields, tickers], names=["Price", "Ticker"])
    data = np.arange(len(idx) * len(cols), dtype=float).reshape(len(idx), len(cols)) + 1
    frame = pd.DataFrame(data, index=idx, columns=cols)
    if not adjusted:
        frame.loc[:, ("Adj Close", slice(None))] = 7.0
    return frame.swaplevel(axis=1) if group_by == "ticker" else frame


@pytest.mark.parametrize("group_by", ["column", "ticker"])
def test_yfinance_multiindex_output_is_normalised(group_by):
    raw = _yf_frame(["AAPL"], group_by)
    out = fetch_prices.normalise_yfinance(raw, "AAPL")
    assert list(out.columns) == ["date", "ticker", "close", "volume"]
    assert out.close.tolist() == raw.xs("AAPL", axis=1, level="Ticker")["Close"].tolist()
    assert out.volume.tolist() == raw.xs("AAPL", axis=1, level="Ticker")["Volume"].tolist()
    assert (fetch_prices.normalise_yfinance(_yf_frame(["AAPL"], adjusted=False), "AAPL").close == 7.0).all()
    flat = raw.xs("AAPL", axis=1, level="Ticker")  # yfinance before 0.2.48: flat columns
    assert fetch_prices.normalise_yfinance(flat, "AAPL").close.tolist() == out.close.tolist()


def test_yfinance_source_retries_with_backoff_and_caches_per_ticker(tmp_path, monkeypatch):
    calls, sleeps = [], []

    def download(ticker, **kw):
        calls.append(ticker)
        if calls.count(ticker) == 1:
            raise ConnectionError("Yahoo is unreachable")
        return _yf_frame([ticker])

    monkeypatch.setitem(sys.modules, "yfinance", types.SimpleNamespace(download=download))
    monkeypatch.setattr(fetch_prices.time, "sleep", sleeps.append)
    start, end = DAYS[0].date(), DAYS[-1].date()
    out = fetch_prices._yfinance(["AAPL", "MSFT"], start, end, tmp_path)
    assert calls == ["AAPL", "AAPL", "MSFT", "MSFT"] and sleeps == [2.0, 2.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"AAPL_{start}_{end}.parquet", f"MSFT_{start}_{end}.parquet"]
    again = fetch_prices._yfinance(["AAPL", "MSFT"], start, end, tmp_path)  # from the cache: no download
    assert len(calls) == 4
    pd.testing.assert_frame_equal(out, again)

    monkeypatch.setitem(sys.modules, "yfinance", types.SimpleNamespace(download=lambda t, **kw: pd.DataFrame()))
    with pytest.raises(HitchhikerError, match="yfinance download of KO failed after 3 tries: no prices"):
        fetch_prices._yfinance(["KO"], start, end, tmp_path)
    assert sleeps[-2:] == [2.0, 4.0]


def test_a_sorted_wide_file_is_not_reported_as_sorted(tmp_path):
    wide = tmp_path / "wide.csv"
    wide.write_text("date,MSFT,AAPL\n2016-01-04,50,100\n2016-01-05,51,101\n2016-01-06,52,102\n")
    prices = fetch_prices.read_file(wide)
    assert list(prices.ticker) == ["AAPL", "MSFT"] * 3
    _, notes = _clean(prices)
    assert not any("sorted" in n for n in notes)
    wide.write_text("date,MSFT,AAPL\n2016-01-05,51,101\n2016-01-04,50,100\n2016-01-06,52,102\n")  # out of order
    _, notes = _clean(fetch_prices.read_file(wide))
    assert any("sorted" in n for n in notes)
