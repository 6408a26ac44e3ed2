"""The market's data: the tidy price table (date, ticker, close) for the configured universe,
which the fetch_prices stage writes (Market.fetch).

Sources (config key market.data.source):
  sample    the bundled S&P 500 sample: daily adjusted closes of 20 US large caps,
            1990-01-02 .. 2022-12-28 (data/sp500_dataset.csv.gz, from skfolio, BSD-3).
  file      a CSV or Parquet at market.data.path, long (date, ticker, close) or wide (a date
            column and one column per ticker).
  yfinance  Yahoo Finance through the yfinance package (adjusted closes and volume),
            cached per ticker under data.cache_dir, retried with backoff. Needs the
            [yfinance] extra and a network.
A long table may carry a volume column (for market.states.features: volume).

Every table then gets the market.data.faults treatment (see the schema): rows out of order,
duplicate (date, ticker) rows, non-positive closes, tickers whose history starts or ends
at different dates (listings, delistings), and missing closes inside a ticker's history
(gaps) are each sorted, dropped, trimmed, forward-filled or refused with one line naming
the ticker, the date and the fault. What was done is printed to the log.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hitchhiker import artifacts, cli, config, frequency
from hitchhiker.environments.dated import read_times

SAMPLE = Path(__file__).resolve().parents[4] / "data" / "sp500_dataset.csv.gz"


DATE_NAMES = ("date", "datetime", "timestamp")
TICKER_NAMES = ("ticker", "symbol")
# the price column, best first: the README promises adjusted closes, so an adjusted close wins
PRICE_NAMES = ("adj close", "adjclose", "adjusted close", "close", "price")
FIELD_NAMES = {"open", "high", "low", "volume", *PRICE_NAMES}  # an OHLCV table's columns


def _key(name) -> str:
    """A column name as matched: any case, spaces or underscores ("Adj_Close" is "adj close")."""
    return " ".join(str(name).strip().lower().replace("_", " ").split())


def _tidy(raw: pd.DataFrame, origin: str, ticker: str | None = None) -> tuple[pd.DataFrame, str]:
    """(date, ticker, close[, volume]) from a long, wide or one-ticker table, and one line
    saying which shape and which columns were read.

    long: date, ticker (or symbol) and price columns, one row per (date, ticker).
    one ticker: date and price columns, such as an OHLCV download; its ticker is ``ticker``
    (market.data.path: {TICKER: file}). A yfinance CSV with its two-row (field, ticker) header
    names its own tickers. wide: a date column and one column per ticker.
    """
    df = raw
    if isinstance(df.columns, pd.MultiIndex):  # yfinance's (Price, Ticker) header, saved by to_csv
        names = list(dict.fromkeys(df.columns.get_level_values(1)))
        what = f"a yfinance download of {', '.join(names)}"
        if ticker is not None:  # one ticker of it, under market.data.path: {TICKER: file}
            _holds(ticker, names, origin)
            return _tidy(normalise_yfinance(df, ticker), origin)[0], f"{origin}: {what}: read {ticker}'s"
        frames = [normalise_yfinance(df, t) for t in names]
        return _tidy(pd.concat(frames), origin)[0], f"{origin}: {what}"
    if _key(df.index.name) in DATE_NAMES:  # a Parquet saved with its dates as the index
        df = df.reset_index()
    cols: dict[str, str] = {}
    for c in df.columns:
        cols.setdefault(_key(c), c)
    date_col = next((cols[n] for n in DATE_NAMES if n in cols), None)
    if date_col is None and str(df.columns[0]).startswith("Unnamed: 0"):
        date_col = df.columns[0]  # pandas' to_csv of an unnamed date index: a blank first header
    if date_col is None:
        hint = next((f"; is it separated by {sep!r}? save it with commas" for sep in ";\t|" if
                     any(sep in str(c) for c in df.columns)), "")  # fmt: skip
        raise cli.HitchhikerError(f"{origin}: no 'date' column (columns: {', '.join(map(str, df.columns))}){hint}")
    ticker_col = next((cols[n] for n in TICKER_NAMES if n in cols), None)
    price_col = next((cols[n] for n in PRICE_NAMES if n in cols), None)
    volume_col = cols.get("volume")
    others = [repr(c) for n, c in cols.items() if n in PRICE_NAMES and c != price_col]
    unused = f", not {' or '.join(others)}" if others else ""
    picked = ""
    if ticker is not None and ticker_col is not None and df[ticker_col].nunique() > 1:
        # a long table of several tickers under market.data.path: {TICKER: file}: that ticker's rows
        names = list(dict.fromkeys(df[ticker_col].astype(str)))
        _holds(ticker, names, origin)
        df, picked = df[df[ticker_col].astype(str) == ticker], f" of a long table of {', '.join(names)}"
    elif ticker is not None and ticker_col is None and price_col is None:
        # a wide table (a column per ticker) under market.data.path: {TICKER: file}: that column
        names = [str(c) for c in df.columns if c != date_col]
        _holds(ticker, names, origin)
        df = df[[date_col, next(c for c in df.columns if str(c) == ticker)]]
        price_col, picked = df.columns[1], f" of a wide table of {', '.join(names)}"
    if ticker is not None or (ticker_col is None and price_col is not None):
        if ticker is None:
            raise cli.HitchhikerError(
                f"{origin} holds one ticker's prices (columns {', '.join(map(str, df.columns))}): name its ticker "
                f"in the config, market.data.path: {{TICKER: {origin.removeprefix('price file ')}}}"
            )
        if price_col is None:
            raise cli.HitchhikerError(
                f"{origin}: no price column (want one of Adj Close, Close, Price; columns: "
                f"{', '.join(map(str, df.columns))})"
            )
        if ticker_col is not None and set(df[ticker_col].astype(str)) != {ticker}:
            raise cli.HitchhikerError(
                f"{origin}: given as the prices of {ticker}, but its {ticker_col!r} column holds "
                f"{', '.join(sorted(set(df[ticker_col].astype(str)))[:5])}"
            )
        shape = f"one ticker, {ticker}{picked} (date {date_col!r}, close {price_col!r}{unused})"
        ticker_values = ticker
    elif ticker_col is not None:
        if price_col is None:
            raise cli.HitchhikerError(
                f"{origin}: a {ticker_col!r} column but no price column (want one of Adj Close, Close, Price; "
                f"columns: {', '.join(map(str, df.columns))})"
            )
        shape = f"long table (date {date_col!r}, ticker {ticker_col!r}, close {price_col!r}{unused})"
        ticker_values = df[ticker_col].astype(str).to_numpy()
    else:
        shape = f"wide table (date {date_col!r}, {df.shape[1] - 1} ticker columns)"
        df = df.rename(columns={date_col: "date"}).melt(id_vars="date", var_name="ticker", value_name="close")
        date_col, price_col, volume_col, ticker_values = "date", "close", None, df["ticker"].astype(str).to_numpy()
    out = pd.DataFrame({"date": df[date_col].to_numpy(), "ticker": ticker_values, "close": df[price_col].to_numpy()})
    if volume_col is not None:
        out["volume"] = pd.to_numeric(df[volume_col], errors="coerce").to_numpy()
    wall = read_times(out["date"], origin)
    out["date"] = wall.dt.normalize()
    _refuse_intraday(out, wall, origin)
    close = pd.to_numeric(out["close"], errors="coerce")
    text = close.isna() & out["close"].notna()  # pandas has already read blanks, NA, null and #N/A as missing
    if text.any():
        row = out[text].iloc[0]
        raise cli.HitchhikerError(
            f"{origin}: unreadable close {row.close!r} for {row.ticker} on {row.date.date()} (want a number; "
            "leave the cell empty for a missing close)"
        )
    out["close"] = close
    if shape.startswith("wide") and out.groupby("ticker", sort=False)["date"].is_monotonic_increasing.all():
        # melting a wide table lays its rows out ticker by ticker: back to (date, ticker) order,
        # unless the file's own dates were out of order (then market.data.faults.unsorted decides)
        out = out.sort_values(["date", "ticker"], kind="stable", ignore_index=True)
    return out, f"{origin}: {shape}"


def _holds(ticker: str, names: list[str], origin: str) -> None:
    if ticker not in names:
        listed = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        raise cli.HitchhikerError(
            f"{origin}: given as the prices of {ticker} (market.data.path), but it holds {listed}"
        )


def _refuse_intraday(out: pd.DataFrame, wall: pd.Series, origin: str) -> None:
    """A ticker priced at two times of one day is a file of intraday bars: each day takes one
    close, so read as dates they were duplicates that disagree; say what the file is."""
    if not (wall != out["date"]).any():  # every price at midnight: daily (yfinance's stamps)
        return
    stamps = pd.DataFrame({"ticker": out["ticker"], "date": out["date"], "at": wall}).drop_duplicates()
    bars = stamps[stamps.duplicated(["ticker", "date"], keep=False)]
    if len(bars):
        ticker, day = bars["ticker"].iloc[0], bars["date"].iloc[0]
        first, second = bars["at"][(bars["ticker"] == ticker) & (bars["date"] == day)].iloc[:2]
        raise cli.HitchhikerError(
            f"{origin}: {ticker} is priced at {first:%H:%M} and at {second:%H:%M} on {day.date()}: intraday bars; "
            "a run decides on one close a day, so save the file's daily closes (each day's last bar)"
        )


def read_close_dates(values: pd.Series, origin: str, what: str) -> pd.Series:
    """read_times' days for what was known by a day's close (a headline, a signal), refusing a
    time of day: a headline stamped 20:15 on 5 March came after that day's close, and its
    date alone would show it to the 5 March decision. Without the exchange's close and zone
    the time cannot be placed, so the file must say the day."""
    wall = read_times(values, origin)
    timed = (wall != wall.dt.normalize()).to_numpy()
    if timed.any():
        row = int(timed.argmax())
        raise cli.HitchhikerError(
            f"{origin}: {values.iloc[row]!s} in row {row + 1} has a time of day; date each {what} by the "
            "trading day by whose close it was known (after the close: the next day), with no time"
        )
    return wall


def read_file(path: str | Path, ticker: str | None = None) -> tuple[pd.DataFrame, str]:
    """The tidy table of one price file and the line saying how it was read (see _tidy)."""
    path = Path(path)
    if path.is_dir():
        raise cli.HitchhikerError(f"price file {path} is a directory: name a CSV or Parquet file in it")
    if not path.is_file():
        where = "" if path.is_absolute() else f" (relative to the working directory {Path.cwd()})"
        raise cli.HitchhikerError(f"price file {path} does not exist{where}")
    if path.stat().st_size == 0:
        raise cli.HitchhikerError(f"price file {path} is empty")
    if path.suffix.lower() in {".xlsx", ".xls", ".xlsm", ".ods"}:
        raise cli.HitchhikerError(f"price file {path}: a spreadsheet is not read; save the sheet as CSV (UTF-8)")
    not_utf8 = None  # the first byte that is not UTF-8, where one is
    try:
        if path.suffix == ".parquet":
            raw = pd.read_parquet(path)
        else:
            data = path.read_bytes()
            try:
                data.decode()
            except UnicodeDecodeError as err:
                not_utf8 = f"{err.object[err.start]:#04x}"
            head = [line.decode(errors="replace").lower() for line in data.splitlines()[:2]]
            two_rows = len(head) == 2 and head[0].startswith("price,") and head[1].startswith("ticker,")
            # a byte that is not UTF-8 is read as U+FFFD: harmless in a column not read (a
            # Latin-1 "Soci\xe9t\xe9" note beside the closes); refused below where a read value has one
            kw = {"header": [0, 1], "index_col": 0} if two_rows else {}  # yfinance's to_csv
            raw = pd.read_csv(path, encoding_errors="replace", **kw)
    except Exception as err:  # pandas raises many types for malformed files
        raise cli.HitchhikerError(f"price file {path}: cannot read ({str(err).splitlines()[0]})") from None
    if raw.empty:
        raise cli.HitchhikerError(f"price file {path} is empty")
    refuse = cli.HitchhikerError(
        f"price file {path}: not UTF-8 text (it holds byte {not_utf8}); save it as UTF-8 (CSV UTF-8 in Excel)"
    )
    try:
        out, line = _tidy(raw, f"price file {path}", ticker)
    except cli.HitchhikerError as err:
        if not_utf8 and "\ufffd" in str(err):  # a value read held the byte
            raise refuse from None
        raise
    if not_utf8:
        if out["ticker"].str.contains("\ufffd").any():
            raise refuse
        line += f"; not UTF-8 (byte {not_utf8}), in no value read"
    return out, line


def read_source(data_cfg: dict) -> tuple[pd.DataFrame, list[str]]:
    """The tidy table of market.data.path (one file, or {ticker: file}) and how each file was read."""
    path = data_cfg["path"]
    if not isinstance(path, dict):
        df, how = read_file(path)
        return df, [how]
    frames, notes = [], []
    for t, f in path.items():
        df, how = read_file(f, t)
        notes.append(how)
        late = df["date"].diff() < pd.Timedelta(0)
        if late.any():  # (date, ticker) order is the files' joint order: check each file's own dates here
            row = int(late.to_numpy().argmax())
            if data_cfg.get("faults", {}).get("unsorted") == "error":
                raise cli.HitchhikerError(
                    f"price file {f}: row {row + 1} ({df.date.iloc[row].date()}) is out of date order "
                    "(market.data.faults.unsorted = error)"
                )
            notes.append(f"price file {f}: rows were out of date order: sorted")
        frames.append(df)
    prices = pd.concat(frames, ignore_index=True).sort_values(["date", "ticker"], kind="stable", ignore_index=True)
    return prices, notes


YF_RETRIES, YF_BACKOFF_S = 3, 2.0


def normalise_yfinance(raw: pd.DataFrame, ticker: str) -> pd.DataFrame:
    """Tidy (date, ticker, close, volume) from one ``yfinance.download`` result.

    yfinance returns flat columns (Open, High, Low, Close, Adj Close, Volume) in old versions
    and (field, ticker) or, with group_by="ticker", (ticker, field) MultiIndex columns in
    new ones. The close is the adjusted close: "Adj Close" when present (auto_adjust=False),
    else "Close" (auto_adjust=True, the default, already adjusts it).
    """
    frame = raw
    if isinstance(frame.columns, pd.MultiIndex):
        level = next((i for i in range(frame.columns.nlevels) if ticker in frame.columns.get_level_values(i)), None)
        if level is None:
            raise cli.HitchhikerError(f"yfinance result for {ticker} has no {ticker} columns")
        frame = frame.xs(ticker, axis=1, level=level)
    field = "Adj Close" if "Adj Close" in frame.columns else "Close"
    if field not in frame.columns:
        raise cli.HitchhikerError(f"yfinance result for {ticker} has no Close column (columns: {list(frame.columns)})")
    out = pd.DataFrame({"date": frame.index, "ticker": ticker, "close": frame[field].to_numpy()})
    if "Volume" in frame.columns:
        out["volume"] = frame["Volume"].to_numpy(dtype=float)
    return out


def _yfinance(tickers: list[str], start: dt.date, end: dt.date, cache_dir: Path) -> pd.DataFrame:
    """Download adjusted closes per ticker with retries and backoff, caching each as Parquet."""
    try:
        import yfinance as yf
    except ImportError:
        raise cli.HitchhikerError(
            "market.data.source is yfinance but the yfinance package is not installed: pip install -e '.[yfinance]'"
        ) from None
    frames = []
    for ticker in tickers:
        cache = cache_dir / f"{ticker}_{start}_{end}.parquet"
        if not cache.exists():
            problem = None
            for attempt in range(YF_RETRIES):
                try:
                    raw = yf.download(
                        ticker, start=str(start), end=str(end + dt.timedelta(days=1)), auto_adjust=True, progress=False
                    )
                    if raw is not None and not raw.empty:
                        break
                    problem = "no prices (offline, or an unknown ticker?)"
                except Exception as err:  # yfinance raises many types for network trouble
                    problem = str(err).splitlines()[0] if str(err) else type(err).__name__
                if attempt + 1 < YF_RETRIES:
                    time.sleep(YF_BACKOFF_S * 2**attempt)
            else:
                raise cli.HitchhikerError(f"yfinance download of {ticker} failed after {YF_RETRIES} tries: {problem}")
            artifacts.write_parquet(normalise_yfinance(raw, ticker), cache)
        frames.append(pd.read_parquet(cache))
    return _tidy(pd.concat(frames), "yfinance")[0]


def clean(prices: pd.DataFrame, faults: dict, need: int) -> tuple[pd.DataFrame, list[str]]:
    """Apply the market.data.faults policies to a tidy table; return it and one line per treatment.

    ``need`` is the fewest tickers the state formats need (for faults: ragged = drop).
    """
    notes: list[str] = []
    idx = pd.MultiIndex.from_frame(prices[["date", "ticker"]])
    if not idx.is_monotonic_increasing:
        if faults["unsorted"] == "error":
            bad = next(i for i in range(1, len(idx)) if idx[i] < idx[i - 1])
            raise cli.HitchhikerError(
                f"price row {bad + 1} ({prices.ticker.iloc[bad]} on {prices.date.iloc[bad].date()}) is out of "
                f"(date, ticker) order (market.data.faults.unsorted = error)"
            )
        prices = prices.sort_values(["date", "ticker"], kind="stable")
        notes.append("rows were out of (date, ticker) order: sorted")
    dup = prices.duplicated(["date", "ticker"], keep=False)
    if dup.any():
        clash = prices[dup].groupby(["date", "ticker"])["close"].nunique(dropna=False) > 1
        row = prices[dup].iloc[0]
        if faults["duplicate"] == "error" or clash.any():
            if clash.any():
                d, t = clash[clash].index[0]
                raise cli.HitchhikerError(f"duplicate price rows for {t} on {d.date()} disagree on the close")
            raise cli.HitchhikerError(
                f"duplicate price row for {row.ticker} on {row.date.date()} (market.data.faults.duplicate = error)"
            )
        prices = prices.drop_duplicates(["date", "ticker"], keep="last")
        notes.append(
            f"{int(dup.sum())} duplicate rows (identical closes): dropped, first {row.ticker} on {row.date.date()}"
        )
    bad = prices["close"] <= 0
    if bad.any():
        row = prices[bad].iloc[0]
        if faults["non_positive"] == "error":
            raise cli.HitchhikerError(f"non-positive close {row.close} for {row.ticker} on {row.date.date()}")
        prices = prices.assign(close=prices["close"].where(~bad))
        notes.append(
            f"{int(bad.sum())} non-positive closes treated as missing, first {row.ticker} on {row.date.date()}"
        )

    wide = prices.pivot(index="date", columns="ticker", values="close").sort_index()
    first, last = wide.apply(pd.Series.first_valid_index), wide.apply(pd.Series.last_valid_index)
    if first.isna().any():
        raise cli.HitchhikerError(f"no prices for {', '.join(first[first.isna()].index)} in the fetched range")
    late, early = first[first > first.min()], last[last < last.max()]
    if len(late) or len(early):
        t, what = (  # a listing or a delisting, or only a file that starts or stops at another date
            (late.index[0], f"starts {late.iloc[0].date()}, after the others' {first.min().date()}")
            if len(late)
            else (early.index[0], f"ends {early.iloc[0].date()}, before the others' {last.max().date()}")
        )
        if faults["ragged"] == "error":
            raise cli.HitchhikerError(f"ragged history: {t} {what} (market.data.faults.ragged = error)")
        if faults["ragged"] == "drop":
            gone = sorted(set(late.index) | set(early.index))
            if wide.shape[1] - len(gone) < need:
                raise cli.HitchhikerError(
                    f"ragged history: dropping {', '.join(gone)} leaves fewer than the {need} tickers the formats need"
                )
            wide = wide.drop(columns=gone)
            notes.append(f"ragged history ({t} {what}): dropped {', '.join(gone)}")
        else:
            lost = (first.max() - first.min()) + (last.max() - last.min())
            wide = wide.loc[first.max() : last.min()]
            gone = sorted(set(late.index) | set(early.index))
            instead = (
                f"market.data.faults.ragged = drop keeps it and drops {', '.join(gone)}"
                if wide.shape[1] - len(gone) >= need
                else f"dropping {', '.join(gone)} instead would leave fewer than the {need} tickers the formats need"
            )
            notes.append(
                f"ragged history ({t} {what}): every ticker trimmed to {first.max().date()} .. {last.min().date()}, "
                f"{lost.days / 365.25:.1f} years of the others' history unused ({instead})"
            )
    wide = wide.dropna(how="all")
    gaps = wide.isna()
    if gaps.to_numpy().any():
        t = gaps.any().idxmax()
        d = gaps[t].idxmax()
        if faults["missing"] == "error":
            raise cli.HitchhikerError(f"missing close for {t} on {d.date()} (market.data.faults.missing = error)")
        if faults["missing"] == "drop":
            wide = wide[~gaps.any(axis=1)]
            notes.append(f"{int(gaps.any(axis=1).sum())} dates with a missing close dropped, first {t} on {d.date()}")
        else:
            limit = faults["ffill_limit"]
            held = gaps.to_numpy()
            total = np.cumsum(held, axis=0)
            run = total - np.maximum.accumulate(np.where(held, 0, total), axis=0)  # gap length so far
            if (run > limit).any():
                row, j = np.argwhere(run > limit)[0]
                t, gap_start = wide.columns[j], wide.index[row - limit]
                raise cli.HitchhikerError(
                    f"missing closes for {t} from {gap_start.date()}: a gap longer than "
                    f"market.data.faults.ffill_limit = {limit} dates"
                )
            wide = wide.ffill()
            notes.append(f"{int(gaps.to_numpy().sum())} missing closes forward-filled, first {t} on {d.date()}")
    out = wide.rename_axis(columns=None).reset_index().melt(id_vars="date", var_name="ticker", value_name="close")
    if "volume" in prices:
        vol = prices.pivot(index="date", columns="ticker", values="volume")
        out = out.merge(vol.stack().rename("volume").reset_index(), on=["date", "ticker"], how="left")
        out["volume"] = out["volume"].fillna(0.0)  # a filled day traded nothing
    return out.sort_values(["date", "ticker"]).reset_index(drop=True), notes


def required(data: dict) -> None:
    """market.data.tickers: not required by the shared schema (other environments have no tickers)."""
    if not data.get("tickers"):
        raise cli.HitchhikerError("config key market.data.tickers is required: the market environments' universe")


def files(data: dict) -> list[str]:
    """The files the configured source reads (none for yfinance, which downloads)."""
    if data["source"] == "sample":
        return [str(SAMPLE)]
    if data["source"] == "file":
        return list(data["path"].values()) if isinstance(data["path"], dict) else [data["path"]]
    return []


def source(data: dict) -> str:
    """The data source in words, for the first line of the log and of the console."""
    if data["source"] == "sample":
        return f"sample, the bundled {SAMPLE.relative_to(SAMPLE.parents[1])}"
    if data["source"] == "file":
        path = data["path"]
        return "file " + (", ".join(f"{t}: {f}" for t, f in path.items()) if isinstance(path, dict) else str(path))
    return f"yfinance, cached in {data['cache_dir']}"


def fetch(cfg: dict, need: int) -> tuple[pd.DataFrame, list[str]]:
    """The cleaned price table and the log's lines; ``need`` is the fewest tickers a state shows."""
    data, states = cfg["market"]["data"], cfg["states"]
    required(data)

    def date_range(freq: str) -> tuple[dt.date, dt.date]:
        # the splits' dates, padded by twice the window and horizon in calendar days (weekends)
        per_period = 1 if freq == "daily" else 365.25 / frequency.FREQUENCIES[freq][3]
        pad = dt.timedelta(days=2 * (states["window"] + states["horizon"]) * per_period + 30)
        start = config.date_at(cfg, "market", "data", "start") or config.date_at(cfg, "states", "train", "start") - pad
        end = config.date_at(cfg, "market", "data", "end") or config.date_at(cfg, "states", "test", "end") + pad
        return start, end

    read = [f"source: {source(data)}"]
    if data["source"] == "sample":
        prices = _tidy(pd.read_csv(SAMPLE), f"sample {SAMPLE.name}")[0]
    elif data["source"] == "file":
        prices, how = read_source(data)
        read += how
    else:
        prices = _yfinance(data["tickers"], *date_range("daily"), Path(data["cache_dir"]))
    missing = sorted(set(data["tickers"]) - set(prices["ticker"]))
    if missing:
        have = sorted(prices["ticker"].unique())
        listed = ", ".join(have[:20]) + (f" and {len(have) - 20} more" if len(have) > 20 else "")
        raise cli.HitchhikerError(
            f"config key market.data.tickers: {', '.join(missing)} not in the {data['source']} source (it has {listed})"
        )
    prices = prices[prices["ticker"].isin(data["tickers"])]
    today = pd.Timestamp(dt.date.today())
    future = prices[prices["date"] > today]
    if len(future):  # a close that has not happened: a wrong year, or a file of simulated prices
        first = future.sort_values("date").iloc[0]
        raise cli.HitchhikerError(
            f"{source(data)}: {first['ticker']} is priced on {first['date'].date()}, after today ({today.date()}); "
            "a decision's outcome must have happened (check the year, or the day and month order)"
        )
    freqs = prices.groupby("ticker")["date"].agg(frequency.detect)
    if freqs.nunique() > 1:  # else the sparser ticker's missing rows read as gaps to forward-fill
        a, b = freqs.index[0], freqs.index[freqs != freqs.iloc[0]][0]
        raise cli.HitchhikerError(
            f"{a}'s prices are {freqs[a]} and {b}'s {freqs[b]}: a run's tickers need one frequency"
        )
    start, end = date_range(freqs.iloc[0])  # the tickers' one frequency
    everything = prices
    prices = prices[(prices["date"] >= pd.Timestamp(start)) & (prices["date"] <= pd.Timestamp(end))]
    empty = sorted(set(data["tickers"]) - set(prices.dropna(subset=["close"])["ticker"]))
    if empty:
        have = everything[(everything.ticker == empty[0]) & everything.close.notna()].date
        span = f"{have.min().date()} .. {have.max().date()}" if len(have) else "no date"
        keys = (
            "market.data.start .. market.data.end"
            if data.get("start") or data.get("end")
            else "states.train.start .. states.test.end"
        )
        raise cli.HitchhikerError(
            f"no prices for {', '.join(empty)} between {start} and {end} (config keys {keys}, padded by the window "
            f"and horizon); the {data['source']} source has {empty[0]} on {span}"
        )
    prices, notes = clean(prices.reset_index(drop=True), data["faults"], need)
    freq = frequency.detect(prices["date"])
    frequency.check_horizon(freq, states["horizon"])
    unit = frequency.periods(freq, 2)[2:]
    return prices, [
        *read,
        *notes,
        f"{prices.ticker.nunique()} tickers, {freq} prices: states.window, horizon, stride and embargo count {unit}",
    ]


def preflight(cfg: dict, env) -> None:
    """Fetch and split the prices as the stages will, so that a ticker, fault, frequency,
    window or date-range error stops the run in one line before any job starts (Snakefile).

    A range error names the dates the prices cover once cleaned and why they were trimmed.
    Skipped for yfinance, which would download. Takes about a second on the bundled sample.
    """
    required(cfg["market"]["data"])
    if cfg["market"]["data"]["source"] == "yfinance":
        return
    prices, notes = fetch(cfg, env.tickers_per_state(cfg))
    try:
        env.check_data(prices, cfg)
    except cli.HitchhikerError as err:
        trims = [n for n in notes if n.startswith("ragged history")]
        raise cli.HitchhikerError("; ".join([str(err), *trims])) from None
