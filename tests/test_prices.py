"""Price tables with faults get their documented treatment (market.data.faults) or a one-line
error naming ticker, date and fault; the yfinance source normalises the real shapes of
yfinance.download output, caches per ticker and retries."""

import sys
import types

import numpy as np
import pandas as pd
import pytest

from conftest import stage, tiny_config, write_config
from hitchhiker import frequency
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments.market import prices as fetch_prices

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
    assert "KO starts 2016-01-06, after the others' 2016-01-04" in notes[-1]
    assert (
        "dropping KO instead would leave fewer than the 3 tickers"
        in fetch_prices.clean(df.reset_index(drop=True), {**_policy(), "ragged": "trim"}, need=3)[1][-1]
    )
    out, _ = fetch_prices.clean(df.reset_index(drop=True), {**_policy(), "ragged": "drop"}, need=2)
    assert set(out.ticker) == {"AAPL", "MSFT"} and len(out) == 16
    with pytest.raises(HitchhikerError, match="fewer than the 3 tickers"):
        fetch_prices.clean(df.reset_index(drop=True), {**_policy(), "ragged": "drop"}, need=3)
    with pytest.raises(HitchhikerError, match="ragged history: KO starts 2016-01-06"):
        fetch_prices.clean(df.reset_index(drop=True), {**_policy(), "ragged": "error"}, need=2)
    delisted = _without(_table(), "MSFT", DAYS[6:])
    with pytest.raises(HitchhikerError, match="MSFT ends 2016-01-11, before the others' 2016-01-13"):
        fetch_prices.clean(delisted.reset_index(drop=True), {**_policy(), "ragged": "error"}, need=2)


def _file_config(path) -> dict:
    """The tiny config on a price file of AAPL and MSFT over DAYS."""
    cfg = tiny_config(market={"data": {"source": "file", "path": str(path), "tickers": ["AAPL", "MSFT"]}})
    cfg["states"].update(window=2, horizon=1, train={"start": "2016-01-04", "end": "2016-01-06"},
                         test={"start": "2016-01-11", "end": "2016-01-13"})  # fmt: skip
    return cfg


def test_the_cli_applies_the_policy_and_logs_it(tmp_path):
    df = _without(_table(), "AAPL", DAYS[3:4])
    df.to_csv(tmp_path / "p.csv", index=False)
    cfg = _file_config(tmp_path / "p.csv")
    out = tmp_path / "prices.parquet"
    proc = stage("fetch_prices", "--config", write_config(tmp_path / "c.yaml", cfg), "--out", out)
    assert "1 missing closes forward-filled, first AAPL on 2016-01-07" in proc.stdout
    assert len(pd.read_parquet(out)) == 16
    cfg["market"]["data"]["faults"] = {"missing": "error"}
    proc = stage("fetch_prices", "--config", write_config(tmp_path / "c.yaml", cfg), "--out", out, check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "hitchhiker: error: missing close for AAPL on 2016-01-07 (market.data.faults.missing = error)"
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
    prices = fetch_prices.read_file(wide)[0]
    assert list(prices.ticker) == ["AAPL", "MSFT"] * 3
    _, notes = _clean(prices)
    assert not any("sorted" in n for n in notes)
    wide.write_text("date,MSFT,AAPL\n2016-01-05,51,101\n2016-01-04,50,100\n2016-01-06,52,102\n")  # out of order
    _, notes = _clean(fetch_prices.read_file(wide)[0])
    assert any("sorted" in n for n in notes)


def _ohlcv(close, adj):
    """One ticker's OHLCV download (yfinance's flat columns, as older versions save them)."""
    return pd.DataFrame({"Date": DAYS.strftime("%Y-%m-%d"), "Open": close, "High": close, "Low": close,
                         "Close": close, "Adj Close": adj, "Volume": 1000.0})  # fmt: skip


@pytest.mark.parametrize(
    "columns",
    [
        ["date", "ticker", "close"],
        ["Date", "Symbol", "Price"],
        ["DATE", "symbol", "Adj_Close"],
        ["timestamp", "Ticker", "adjusted close"],
    ],
)
def test_long_tables_are_read_under_the_common_spellings(tmp_path, columns):
    _table().set_axis(columns, axis=1).to_csv(tmp_path / "p.csv", index=False)
    prices, how = fetch_prices.read_file(tmp_path / "p.csv")
    pd.testing.assert_frame_equal(prices, _table())
    assert f"long table (date {columns[0]!r}, ticker {columns[1]!r}, close {columns[2]!r})" in how


def test_a_latin_1_byte_in_a_column_not_read_is_said_and_the_closes_are_read(tmp_path):
    """A Latin-1 note beside the closes (Excel's "CSV" on Windows): the closes, dates and
    tickers are UTF-8, so the file is read, and the line says what was found."""
    text = "".join(f"{r.date:%Y-%m-%d},{r.ticker},{r.close},Soci\xe9t\xe9\n" for r in _table().itertuples())
    (tmp_path / "p.csv").write_bytes(("date,ticker,close,note\n" + text).encode("latin-1"))
    prices, how = fetch_prices.read_file(tmp_path / "p.csv")
    pd.testing.assert_frame_equal(prices, _table())
    assert how.endswith("; not UTF-8 (byte 0xe9), in no value read")


def test_a_long_table_with_close_and_adj_close_uses_the_adjusted_one(tmp_path):
    df = _table().rename(columns={"close": "Adj Close"}).assign(Close=lambda d: d["Adj Close"] * 2)
    df.to_csv(tmp_path / "p.csv", index=False)
    prices, how = fetch_prices.read_file(tmp_path / "p.csv")
    assert prices.close.tolist() == _table().close.tolist()
    assert how.endswith("close 'Adj Close', not 'Close')")


def test_one_ticker_ohlcv_files_take_their_ticker_from_the_config(tmp_path):
    close = np.arange(8) + 100.0
    _ohlcv(close, close / 2).to_csv(tmp_path / "aapl.csv", index=False)
    _ohlcv(close + 50, (close + 50) / 2).to_parquet(tmp_path / "msft.parquet")
    with pytest.raises(
        HitchhikerError,
        match=r"holds one ticker's prices \(columns Date, Open, High, Low, Close, "
        r"Adj Close, Volume\): name its ticker in the config, market.data.path: \{TICKER: ",
    ):
        fetch_prices.read_file(tmp_path / "aapl.csv")  # never as a wide table of tickers Open, ..., Volume
    cfg = {"path": {"AAPL": str(tmp_path / "aapl.csv"), "MSFT": str(tmp_path / "msft.parquet")}}
    prices, how = fetch_prices.read_source(cfg)
    assert prices[prices.ticker == "AAPL"].close.tolist() == (close / 2).tolist()  # the adjusted close
    assert prices.volume.eq(1000.0).all() and set(prices.ticker) == {"AAPL", "MSFT"}
    assert how[0].endswith("aapl.csv: one ticker, AAPL (date 'Date', close 'Adj Close', not 'Close')")


def test_per_ticker_files_in_date_order_are_not_reported_as_sorted_and_one_out_of_order_is_named(tmp_path):
    close = np.arange(8) + 100.0
    _ohlcv(close, close).to_csv(tmp_path / "aapl.csv", index=False)
    _ohlcv(close + 50, close + 50).to_csv(tmp_path / "msft.csv", index=False)
    _ohlcv(close + 50, close + 50).iloc[[0, 2, 1, 3, 4, 5, 6, 7]].to_csv(tmp_path / "late.csv", index=False)
    cfg = {"path": {"AAPL": str(tmp_path / "aapl.csv"), "MSFT": str(tmp_path / "msft.csv")}, "faults": _policy()}
    prices, notes = fetch_prices.read_source(cfg)
    assert list(prices.ticker) == ["AAPL", "MSFT"] * 8
    assert not any("sorted" in n for n in notes + _clean(prices)[1])
    cfg["path"]["MSFT"] = str(tmp_path / "late.csv")
    prices, notes = fetch_prices.read_source(cfg)
    assert notes[-1] == f"price file {tmp_path / 'late.csv'}: rows were out of date order: sorted"
    assert prices[prices.ticker == "MSFT"].close.tolist() == (close + 50).tolist()
    cfg["faults"]["unsorted"] = "error"
    with pytest.raises(HitchhikerError, match=r"late.csv: row 3 \(2016-01-05\) is out of date order"):
        fetch_prices.read_source(cfg)


def _saved(path, frame, **kwargs):
    frame.to_csv(path, **kwargs)
    return fetch_prices.read_source({"path": {"SPX": str(path)} if "SPX" in path.name else str(path)})


def test_the_shapes_people_save_are_read_without_reshaping(tmp_path):
    days = pd.bdate_range("1999-12-28", periods=30)
    close = np.linspace(100, 130, 30)
    # a one-ticker OHLCV frame saved from pandas: its date index under a blank header
    ohlcv = pd.DataFrame({"Open": close, "High": close, "Low": close, "Close": close, "Volume": 5.0}, index=days)
    prices, how = _saved(tmp_path / "SPX.csv", ohlcv)
    assert (tmp_path / "SPX.csv").read_text().startswith(",Open,")
    assert prices.date.tolist() == list(days) and prices.close.tolist() == close.tolist()
    assert how[0].endswith("one ticker, SPX (date 'Unnamed: 0', close 'Close')")
    # an index file, gzipped, month/day/year; 12/31/1999 settles the order
    us = pd.DataFrame({"Date": days.strftime("%-m/%-d/%Y"), "ticker": "NDX", "Close": close})
    prices, _ = _saved(tmp_path / "ndx.csv.gz", us, index=False)
    assert prices.date.tolist() == list(days)
    # day/month/year, settled by 28/12/1999
    eu = us.assign(Date=days.strftime("%d/%m/%Y"))
    assert _saved(tmp_path / "eu.csv", eu, index=False)[0].date.tolist() == list(days)
    # "Jan 3 2000" month names, a monthly long file
    months = pd.date_range("2000-01-31", periods=12, freq="ME")
    named = pd.DataFrame({"date": [f"{d:%b} {d.day} {d.year}" for d in months], "ticker": "X", "close": 1.0})
    assert _saved(tmp_path / "named.csv", named, index=False)[0].date.tolist() == list(months)


@pytest.mark.parametrize(
    "dates, message",
    [
        (["1/4/2016", "2/4/2016"], r"dates such as '1/4/2016' read as month/day or as day/month"),
        (["13/1/2016", "1/13/2016"], r"dates '13/1/2016' and '1/13/2016' put the day and the month in opposite"),
        (["2016-01-04", "1/5/2016"], r"unreadable date '1/5/2016' in row 2 \(want YYYY-MM-DD, M/D/YYYY"),
        # a typo among slashed dates: its own row, not the first date (which read before)
        (["1/4/2016", "13/4/2016", "14/4/2O16"], r"unreadable date '14/4/2O16' in row 3 \("),
        (["Jan 4 2016", "Jan 5 2016", "Jan 6"], r"unreadable date 'Jan 6' in row 3 \("),
    ],
)
def test_dates_whose_reading_is_not_settled_are_refused_in_one_line(tmp_path, dates, message):
    pd.DataFrame({"date": dates, "ticker": "X", "close": 1.0}).to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(HitchhikerError, match=message):
        fetch_prices.read_file(tmp_path / "p.csv")


def test_a_zoned_date_is_the_day_its_own_zone_says(tmp_path):
    # yfinance stamps each exchange's days at its local midnight; read in UTC, Tokyo's and
    # Frankfurt's days fell on the day before, beside New York's closes of that earlier day
    days = pd.bdate_range("2020-03-02", periods=5)
    zoned = pd.DataFrame(
        [(f"{d:%Y-%m-%d} 00:00:00{zone}", t, 1.0) for d in days for t, zone in
         (("7203.T", "+09:00"), ("SAP.DE", "+01:00"), ("AAPL", "-05:00"))],
        columns=["Date", "Ticker", "Close"],
    )  # fmt: skip
    zoned.to_csv(tmp_path / "zoned.csv", index=False)
    prices, _ = fetch_prices.read_file(tmp_path / "zoned.csv")
    for ticker in ("7203.T", "SAP.DE", "AAPL"):
        assert prices[prices.ticker == ticker].date.tolist() == list(days), ticker
    tokyo = pd.DataFrame({"date": days.tz_localize("Asia/Tokyo"), "ticker": "7203.T", "close": 1.0})
    tokyo.to_parquet(tmp_path / "tokyo.parquet")  # a zoned timestamp column, already read
    assert fetch_prices.read_file(tmp_path / "tokyo.parquet")[0].date.tolist() == list(days)


def test_intraday_bars_are_refused_as_such_and_a_daily_close_stamped_with_its_time_is_read(tmp_path):
    # read as days, hourly bars were duplicates that "disagree on the close": true, but not what is wrong
    days = pd.bdate_range("2020-03-02", periods=3)
    hourly = pd.DataFrame(
        [(f"{d:%Y-%m-%d} {h}:30:00-05:00", t, 100.0 + h) for d in days for h in (9, 10, 11) for t in ("AAPL", "MSFT")],
        columns=["Datetime", "Ticker", "Close"],
    )
    hourly.to_csv(tmp_path / "hourly.csv", index=False)
    with pytest.raises(HitchhikerError, match=r"AAPL is priced at 09:30 and at 10:30 on 2020-03-02: intraday bars"):
        fetch_prices.read_file(tmp_path / "hourly.csv")
    closes = hourly[hourly.Datetime.str.contains(" 11:30")]  # one bar a day, stamped at its time
    closes.to_csv(tmp_path / "closes.csv", index=False)
    assert fetch_prices.read_file(tmp_path / "closes.csv")[0].date.unique().tolist() == list(days)


def test_a_parquet_date_left_empty_is_refused(tmp_path):
    # a CSV's empty date was refused as unreadable; a Parquet's (NaT) was read as a row of no date
    days = [*pd.bdate_range("2020-03-02", periods=3), pd.NaT]
    pd.DataFrame({"date": days, "ticker": "X", "close": 1.0}).to_parquet(tmp_path / "p.parquet")
    with pytest.raises(HitchhikerError, match=r"p.parquet: unreadable date NaT in row 4"):
        fetch_prices.read_file(tmp_path / "p.parquet")


def test_a_yfinance_csv_with_its_two_row_header_is_read(tmp_path):
    frame = _yf_frame(["AAPL", "MSFT"], adjusted=False)  # (field, ticker) columns as yfinance returns them
    frame.columns = frame.columns.set_names(["Price", "Ticker"])
    frame.to_csv(tmp_path / "yf.csv")
    assert (tmp_path / "yf.csv").read_text().startswith("Price,")
    prices, how = fetch_prices.read_file(tmp_path / "yf.csv")
    assert how.endswith("a yfinance download of AAPL, MSFT") and set(prices.ticker) == {"AAPL", "MSFT"}
    expect = fetch_prices.normalise_yfinance(frame, "AAPL").close.tolist()
    assert prices[prices.ticker == "AAPL"].close.tolist() == pytest.approx(expect)


def test_a_file_of_several_tickers_in_a_path_mapping_gives_only_its_tickers_rows(tmp_path):
    # {MSFT: stooq's one-ticker file, GOOG: a yfinance download of GOOG, MSFT and ^GSPC}: GOOG's
    # closes from the download, MSFT's from its own file (the download's MSFT is not read twice)
    frame = _yf_frame(["GOOG", "MSFT", "^GSPC"], adjusted=False)
    frame.to_csv(tmp_path / "yf.csv")
    close = np.arange(8) + 100.0
    _ohlcv(close, close / 2).to_csv(tmp_path / "stooq_msft.csv", index=False)
    long = _table()  # AAPL and MSFT, one row per (date, ticker)
    long.to_csv(tmp_path / "long.csv", index=False)
    long.pivot(index="date", columns="ticker", values="close").reset_index().to_csv(tmp_path / "wide.csv", index=False)
    path = {t: str(tmp_path / f) for t, f in [("MSFT", "stooq_msft.csv"), ("GOOG", "yf.csv"), ("AAPL", "long.csv")]}
    prices, how = fetch_prices.read_source({"path": path})
    assert sorted(prices.ticker.value_counts().items()) == [("AAPL", 8), ("GOOG", 8), ("MSFT", 8)]
    assert prices[prices.ticker == "MSFT"].close.tolist() == (close / 2).tolist()
    goog = fetch_prices.normalise_yfinance(frame, "GOOG").close.tolist()
    assert prices[prices.ticker == "GOOG"].close.tolist() == pytest.approx(goog)
    assert prices[prices.ticker == "AAPL"].close.tolist() == long[long.ticker == "AAPL"].close.tolist()
    assert how[1].endswith("yf.csv: a yfinance download of GOOG, MSFT, ^GSPC: read GOOG's")
    assert "one ticker, AAPL of a long table of AAPL, MSFT (date 'date', close 'close')" in how[2]
    prices, how = fetch_prices.read_source({"path": {"MSFT": str(tmp_path / "wide.csv")}})
    assert prices.close.tolist() == long[long.ticker == "MSFT"].close.tolist()
    assert "of a wide table of AAPL, MSFT" in how[0]
    for name in ("yf.csv", "long.csv", "wide.csv"):  # a ticker the file does not hold: said, with what it holds
        message = rf"{name}: given as the prices of KO \(market.data.path\), but it holds "
        with pytest.raises(HitchhikerError, match=message):
            fetch_prices.read_source({"path": {"KO": str(tmp_path / name)}})


def test_the_fetch_log_says_how_the_file_was_read_and_lists_the_tickers_found(tmp_path):
    _table().rename(columns={"ticker": "symbol"}).to_csv(tmp_path / "p.csv", index=False)
    cfg = _file_config(tmp_path / "p.csv")
    out = tmp_path / "prices.parquet"
    proc = stage("fetch_prices", "--config", write_config(tmp_path / "c.yaml", cfg), "--out", out)
    assert proc.stdout.splitlines()[0] == f"fetch_prices: source: file {tmp_path / 'p.csv'}"
    assert "long table (date 'date', ticker 'symbol', close 'close')" in proc.stdout
    cfg["market"]["data"]["tickers"] = ["AAPL", "NVDA"]
    proc = stage("fetch_prices", "--config", write_config(tmp_path / "c.yaml", cfg), "--out", out, check=False)
    assert proc.stderr.strip().endswith("NVDA not in the file source (it has AAPL, MSFT)")


@pytest.mark.parametrize(
    "dates, freq",
    [
        (pd.bdate_range("2016-01-04", periods=30), "daily"),
        (pd.date_range("2016-01-01", periods=30, freq="W-FRI"), "weekly"),
        (pd.date_range("2016-01-01", periods=30, freq="ME"), "monthly"),
        (pd.date_range("2016-01-01", periods=30, freq="QE"), "quarterly"),
        (pd.date_range("2016-01-01", periods=30, freq="YE"), "annual"),
    ],
)
def test_the_frequency_is_read_from_the_dates_and_words_the_horizon(dates, freq):
    assert frequency.detect(dates.repeat(3)) == freq  # one row per ticker and date
    assert frequency.of_outcomes(dates[:-2], dates[2:], 2) == freq  # outcomes two rows on
    assert frequency.periods(freq, 1) in {"1 trading day", "1 week", "1 month", "1 quarter", "1 year"}
    frequency.check_horizon(freq, frequency.per_year(freq))
    with pytest.raises(HitchhikerError, match="more than a year"):
        frequency.check_horizon(freq, frequency.per_year(freq) + 1)


def test_dates_of_no_known_frequency_are_refused():
    with pytest.raises(HitchhikerError, match="14 calendar days apart \\(the median\\): not daily, weekly"):
        frequency.detect(pd.date_range("2016-01-01", periods=10, freq="14D"))
