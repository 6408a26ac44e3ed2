"""Prompts of the market environments: rendering a state's user message, and reading its
numbers back out (for the hallucination checks, which grade what the text shows).

A prompt shows one section per market.states.features entry for the ``window`` periods ending at
the decision date T, each ticker on a line ("A (AAPL): +0.12 -1.03 ..."), then with
market.data.news the headlines, then the question of its format. The words follow the data's
frequency ("Monthly returns", "over the next 1 month"). Rendering is vectorised over
states with Arrow string kernels: no Python loop per state.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hitchhiker import frequency
from hitchhiker.environments.market import answers

SECTIONS = {  # worded for the data's frequency (frequency.py): "Monthly returns", "this month's close"
    "returns": "{Adjective} returns in percent, oldest first, up to {now} close.",
    "prices": "Closes as a percent of {now} close, oldest first.",
    "volume": "Volume as a percent of its average over these {rows}, oldest first.",
}
NEWS = "Headlines, oldest first:"
SIGNALS = "Signals as of {now} close:"  # market.data.signals: "A (AAPL): rating 4.5, forecast -0.0123", a line a ticker
QUESTION = {
    "pairwise": (
        "Which of A and B will return more over the next {horizon}? "
        "Answer with A or B as the first word, then one short reason."
    ),
    "elementwise": (
        "Over the next {horizon}, should we be long, flat or short {ticker}? "
        "Answer with long, flat or short as the first word, then one short reason."
    ),
    "listwise": (
        "Which of {labels} will return the most over the next {horizon}? Answer first "
        "with one letter, weights such as A=0.5, B=0.5, or a ranking such as {ranking}, then one short reason."
    ),
}
_LUT_MAX = 100_000  # values up to +-1000.00 are formatted by table lookup, the rare rest one by one


@functools.cache
def _lut(signed: bool) -> pa.Array:
    spec = "{:+.2f}" if signed else "{:.2f}"
    return pa.array([spec.format(h / 100) for h in range(-_LUT_MAX, _LUT_MAX + 1)])


def format_values(values: np.ndarray, signed: bool) -> pa.Array:
    """Every value with two decimals ("+1.23" when signed), flattened, as Arrow strings."""
    flat = values.ravel()
    h = np.rint(flat * 100)
    ok = np.isfinite(h) & (np.abs(h) <= _LUT_MAX)
    out = _lut(signed).take(pa.array(np.where(ok, h + _LUT_MAX, 0).astype(np.int64)))
    if ok.all():
        return out
    spec = "{:+.2f}" if signed else "{:.2f}"
    text = out.to_numpy(zero_copy_only=False)
    text[~ok] = [spec.format(v) for v in flat[~ok]]
    return pa.array(text)


def join(strings: pa.Array, every: int, sep: str) -> pa.Array:
    """Join each run of ``every`` consecutive strings with ``sep``."""
    offsets = pa.array(np.arange(0, len(strings) + 1, every, dtype=np.int32))
    return pc.binary_join(pa.ListArray.from_arrays(offsets, strings), sep)


def cat(*parts, sep: str = "") -> pa.Array:
    return pc.binary_join_element_wise(*(p if isinstance(p, pa.Array) else pa.scalar(p) for p in parts), sep)


def headers(freq: str) -> dict[str, str]:
    """The section headers for data of frequency ``freq``: the features' and "signals"."""
    adjective, one, _ = frequency.FREQUENCIES[freq][1:]
    rows, now = ("days", "today's") if freq == "daily" else (f"{one}s", f"this {one}'s")
    texts = {**SECTIONS, "signals": SIGNALS}
    return {key: text.format(Adjective=adjective, rows=rows, now=now) for key, text in texts.items()}


def _signal_texts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signal values as shown (four significant digits): (distinct texts, each value's index)."""
    distinct, inverse = np.unique(np.asarray(values, dtype=float).ravel(), return_inverse=True)
    return np.array([f"{v:.4g}" for v in distinct], dtype=object), inverse  # distinct values: a few per ticker


def signals_as_shown(values: np.ndarray) -> np.ndarray:
    """Signal values as a prompt shows them, as numbers: float("4.5") for 4.5001."""
    texts, inverse = _signal_texts(values)
    return np.array([float(t) for t in texts])[inverse].reshape(np.shape(values))


def render_batch(
    fmt: str,
    names: np.ndarray,
    features: dict[str, np.ndarray],
    horizon: int,
    news: pa.Array | None = None,
    freq: str = "daily",
    signals: dict[str, np.ndarray] | None = None,
) -> pa.Array:
    """User messages of many states of one format.

    ``names`` is (states, k) tickers in prompt order; ``features`` maps each section of
    SECTIONS to (states, k, days) values (returns as fractions, the others as ratios);
    ``news`` is one text block per state (or null for none); ``freq`` words the sections
    and the horizon; ``signals`` maps each market.data.signals name to its (states, k) values.
    """
    horizon = frequency.periods(freq, horizon)
    k = names.shape[1]
    letters = np.array(list(answers.labels(k)))
    tickers = pa.array(names.ravel().astype(str))
    parts = [sections_batch(names, features, freq, labelled=fmt != "elementwise")]
    if signals:
        parts.append(signals_batch(names, signals, freq, labelled=fmt != "elementwise"))
    if news is not None:
        parts.append(cat(NEWS, pc.fill_null(news, "none"), sep="\n"))
    if fmt == "elementwise":
        head, tail = QUESTION[fmt].split("{ticker}")
        question = cat(head.format(horizon=horizon), tickers, tail)
    else:
        labels = ", ".join(letters[:-1]) + f" and {letters[-1]}"
        ranking = ">".join(letters[[1, 0, *range(2, k)]])
        question = pa.scalar(QUESTION[fmt].format(horizon=horizon, labels=labels, ranking=ranking))
    return cat(*parts, question, sep="\n")


def sections_batch(names: np.ndarray, features: dict[str, np.ndarray], freq: str, labelled: bool = True) -> pa.Array:
    """The data sections of many user messages: per section of ``features`` its header, then
    one line per ticker ("A (AAPL): +0.12 -1.03" when ``labelled``, else "AAPL: ...")."""
    words = headers(freq)
    k = names.shape[1]
    label = _labels(names, labelled)
    parts = []
    for key, values in features.items():
        days = values.shape[2]
        body = join(format_values(values * 100, signed=key == "returns"), days, " ")
        parts.append(cat(words[key], join(cat(label, ": ", body), k, "\n"), sep="\n"))
    return cat(*parts, sep="\n")


def _labels(names: np.ndarray, labelled: bool) -> pa.Array:
    """Each ticker's line label: "A (AAPL)", or "AAPL" alone."""
    tickers = pa.array(names.ravel().astype(str))
    n, k = names.shape
    return cat(pa.array(np.tile(list(answers.labels(k)), n)), " (", tickers, ")") if labelled else tickers


def signals_batch(names: np.ndarray, signals: dict[str, np.ndarray], freq: str, labelled: bool = True) -> pa.Array:
    """The signals section: its header, then one line per ticker, "A (AAPL): rating 4.5, forecast -0.0123"."""
    k = names.shape[1]
    values = []
    for name, v in signals.items():
        texts, inverse = _signal_texts(v)
        values.append(cat(f"{name} ", pa.array(texts[inverse], type=pa.string())))
    body = cat(*values, sep=", ")
    return cat(headers(freq)["signals"], join(cat(_labels(names, labelled), ": ", body), k, "\n"), sep="\n")


def render(fmt: str, tickers: list[str], returns: np.ndarray, horizon: int) -> str:
    """The user message of one state showing daily returns (``returns`` is (k, days) fractions)."""
    rets = np.asarray(returns, dtype=float)[None]
    return render_batch(fmt, np.array([tickers]), {"returns": rets}, horizon)[0].as_py()


@functools.cache
def _all_headers() -> dict[str, str]:
    """Every frequency's section headers, to their section."""
    return {v: k for freq in frequency.FREQUENCIES for k, v in headers(freq).items()}


def shown(prompt: str) -> dict[str, dict[str, np.ndarray]]:
    """The numbers a prompt shows: {section: {ticker: values as rendered}}."""
    out: dict[str, dict[str, np.ndarray]] = {}
    current = None
    headers_ = _all_headers()
    for line in prompt.splitlines():
        if line in headers_:
            current = out.setdefault(headers_[line], {})
        elif current is not None and ": " in line and not line.startswith(("Which", "Over")):
            name, values = line.split(": ", 1)
            if current is out.get("signals"):  # "rating 4.5, forecast -0.0123"
                values = " ".join(pair.rpartition(" ")[2] for pair in values.split(", "))
            try:
                current[name.split("(")[-1].rstrip(")")] = np.array([float(x) for x in values.split()])
            except ValueError:
                current = None
        else:
            current = None
    return out


def section_returns(sections: dict[str, dict[str, np.ndarray]]) -> list[np.ndarray]:
    """The daily returns (in percent) a prompt read by :func:`shown` shows for each ticker, in
    prompt order; from the returns section, or derived from the prices section when only
    that is shown."""
    if "returns" in sections:
        return list(sections["returns"].values())
    return [100 * (p[1:] / p[:-1] - 1) for p in sections["prices"].values()]


def news_lines(prompt: str) -> list[str]:
    lines = prompt.splitlines()
    if NEWS not in lines:
        return []
    rest = lines[lines.index(NEWS) + 1 :]
    return [] if rest[:1] == ["none"] else list(itertools.takewhile(lambda s: s[:4].isdigit(), rest))


def as_shown(percent: np.ndarray) -> np.ndarray:
    """Values in percent as a prompt shows them (two decimals), e.g. for the structured
    ``shown_returns`` of a state: float("+1.23") == as_shown(1.2251)."""
    return np.rint(np.asarray(percent) * 100) / 100
