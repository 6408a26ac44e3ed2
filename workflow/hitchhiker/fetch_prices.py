"""fetch_prices: write the tidy price table (date, ticker, close) for the configured universe.

Sources (config key data.source):
  sample    the bundled S&P 500 sample: daily adjusted closes of 20 US large caps,
            1990-01-02 .. 2022-12-28 (data/sp500_dataset.csv.gz, from skfolio, BSD-3).
  file      a CSV or Parquet at data.path, long (date, ticker, close) or wide (a date
            column and one column per ticker).
  yfinance  Yahoo Finance through the yfinance package (adjusted closes), cached per
            ticker under data.cache_dir. Needs the [yfinance] extra and a network.

Usage:
  python -m hitchhiker.fetch_prices --config config.yaml --out results/default/prices.parquet
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd

from hitchhiker import artifacts, cli, config

SECTIONS = ["run", "data", "states"]
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sp500_dataset.csv.gz"


def _tidy(wide_or_long: pd.DataFrame, origin: str) -> pd.DataFrame:
    df = wide_or_long
    cols = {c.lower(): c for c in df.columns}
    if "date" not in cols:
        raise cli.HitchhikerError(f"{origin}: no 'date' column (columns: {', '.join(map(str, df.columns))})")
    df = df.rename(columns={cols["date"]: "date"})
    if "ticker" in cols and "close" in cols:
        df = df.rename(columns={cols["ticker"]: "ticker", cols["close"]: "close"})
    else:
        df = df.melt(id_vars="date", var_name="ticker", value_name="close")
    dates = pd.to_datetime(df["date"], format="ISO8601", errors="coerce", utc=True)
    bad = dates.isna()
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise cli.HitchhikerError(
            f"{origin}: unreadable date {df['date'].iloc[row]!r} in row {row + 1} (want YYYY-MM-DD)"
        )
    df["date"] = dates.dt.tz_localize(None).dt.normalize()
    df["close"] = pd.to_numeric(df["close"], errors="coerce")
    df["ticker"] = df["ticker"].astype(str)
    return df[["date", "ticker", "close"]]


def read_file(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise cli.HitchhikerError(f"price file {path} does not exist")
    if path.stat().st_size == 0:
        raise cli.HitchhikerError(f"price file {path} is empty")
    try:
        raw = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as err:  # pandas raises many types for malformed files
        raise cli.HitchhikerError(f"price file {path}: cannot read ({str(err).splitlines()[0]})") from None
    if raw.empty:
        raise cli.HitchhikerError(f"price file {path} is empty")
    return _tidy(raw, f"price file {path}")


def available_tickers(data_cfg: dict) -> set[str] | None:
    """Tickers a local source holds, read cheaply (header only for the sample); None if unknown."""
    if data_cfg["source"] == "sample":
        return set(pd.read_csv(SAMPLE, nrows=0).columns) - {"Date"}
    if data_cfg["source"] == "file":
        return set(read_file(data_cfg["path"])["ticker"].unique())
    return None


def _yfinance(tickers: list[str], start: dt.date, end: dt.date, cache_dir: Path) -> pd.DataFrame:
    """Download adjusted closes per ticker, caching each ticker's frame as Parquet."""
    try:
        import yfinance as yf
    except ImportError:
        raise cli.HitchhikerError(
            "data.source is yfinance but the yfinance package is not installed: pip install -e '.[yfinance]'"
        ) from None
    frames = []
    for ticker in tickers:
        cache = cache_dir / f"{ticker}_{start}_{end}.parquet"
        if not cache.exists():
            try:
                raw = yf.download(
                    ticker, start=str(start), end=str(end + dt.timedelta(days=1)), auto_adjust=True, progress=False
                )
            except Exception as err:
                raise cli.HitchhikerError(f"yfinance download of {ticker} failed: {err}") from None
            if raw is None or raw.empty:
                raise cli.HitchhikerError(f"yfinance returned no prices for {ticker} (offline, or an unknown ticker?)")
            close = raw["Close"]
            if isinstance(close, pd.DataFrame):  # newer yfinance: columns are (field, ticker)
                close = close.iloc[:, 0]
            artifacts.write_parquet(
                pd.DataFrame({"date": close.index, "ticker": ticker, "close": close.to_numpy()}), cache
            )
        frames.append(pd.read_parquet(cache))
    return _tidy(pd.concat(frames), "yfinance")


def fetch(cfg: dict) -> pd.DataFrame:
    data, states = cfg["data"], cfg["states"]
    pad = dt.timedelta(days=2 * (states["window"] + states["horizon"]) + 30)
    start = config.date_at(cfg, "data", "start") or config.date_at(cfg, "states", "train", "start") - pad
    end = config.date_at(cfg, "data", "end") or config.date_at(cfg, "states", "test", "end") + pad
    if data["source"] == "sample":
        prices = _tidy(pd.read_csv(SAMPLE), f"sample {SAMPLE.name}")
    elif data["source"] == "file":
        prices = read_file(data["path"])
    else:
        prices = _yfinance(data["tickers"], start, end, Path(data["cache_dir"]))
    missing = sorted(set(data["tickers"]) - set(prices["ticker"]))
    if missing:
        raise cli.HitchhikerError(f"config key data.tickers: {', '.join(missing)} not in the {data['source']} source")
    prices = prices[prices["ticker"].isin(data["tickers"])]
    prices = prices[(prices["date"] >= pd.Timestamp(start)) & (prices["date"] <= pd.Timestamp(end))]
    prices = prices.dropna(subset=["close"])
    bad = prices[prices["close"] <= 0]
    if len(bad):
        row = bad.iloc[0]
        raise cli.HitchhikerError(f"non-positive close {row.close} for {row.ticker} on {row.date.date()}")
    dup = prices.duplicated(["date", "ticker"])
    if dup.any():
        row = prices[dup].iloc[0]
        raise cli.HitchhikerError(f"duplicate price row for {row.ticker} on {row.date.date()}")
    empty = sorted(set(data["tickers"]) - set(prices["ticker"]))
    if empty:
        raise cli.HitchhikerError(f"no prices for {', '.join(empty)} between {start} and {end}")
    return prices.sort_values(["date", "ticker"]).reset_index(drop=True)


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--out", required=True, help="Parquet file to write")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    prices = fetch(cfg)
    artifacts.write_parquet(prices, args.out)
    print(
        f"fetch_prices: {len(prices)} rows, {prices.ticker.nunique()} tickers, "
        f"{prices.date.min().date()} .. {prices.date.max().date()} -> {args.out}"
    )


if __name__ == "__main__":
    cli.run(main)
