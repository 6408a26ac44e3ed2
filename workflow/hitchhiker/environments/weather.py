"""The weather environment: will it rain tomorrow? A decision on real data outside finance,
and the template for a new environment: this file and one line in ENVIRONMENTS
(docs/environments.md walks through it).

Data (``fetch``): a daily weather table with date, precipitation (mm), temp_max and
temp_min (degrees C) and, if measured, wind (m/s): by default the bundled record of Seattle,
2012-01-01 .. 2015-12-31 (data/seattle_weather.csv: NOAA's public-domain daily summaries as
the vega_datasets package ships them, MIT), or the CSV or Parquet at weather.path, by these
column names or NOAA's codes (a Climate Data Online export as it comes), in weather.units.
One row per day ("tomorrow" is the next row): a blank reading or a day the file lacks is
carried forward or refused (weather.faults), and a filled day is never an outcome.
State: a decision date T of a split (states.train, states.test, ...: their start, end and
max_states, states.stride and the embargo); the prompt shows the states.window days up to
and including T, oldest first, fewer when it would not fit states.max_prompt_tokens.
Outcome: the next day's precipitation; it rained when it is above weather.rain_mm.
Answer: "yes" or "no" as the first word, then one short reason.
Reward: 1 for a right answer, 0 for a wrong one, reward.invalid_penalty for an invalid one.
Every action is priced (yes and no), so train.objective full_information applies.
Baselines: climatology (yes where the train split rained on more than half the days of the
state's calendar month), persistence (tomorrow as today), threshold (yes where today's rain
is above the amount that best told the next day's rain on the train split's days:
persistence with its cut-off fitted), never (always no).
Audit: reads each prompt's lines back and compares them with the table's rows dated on or
before T, the outcome with the first row after T, and checks the splits' order and embargo.
Claims and reasons (weather_reasons.py): a figure, a day or a sum the prompt does not show
(the shared rules of claims.py), a rain statement that does not hold; what the reason argues
for (rain statements argue yes, dry ones no) against the answer.
Changed prompts (evaluate): today's rain flipped, dry to 5.0 mm or wet to 0.0 mm; a reader of
the evidence moves its answer with it (persistence does, always).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from hitchhiker import metrics
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import dated, files
from hitchhiker.environments.base import Environment

BUNDLED = Path(__file__).resolve().parents[3] / "data" / "seattle_weather.csv"
COLUMNS = ("precipitation", "temp_max", "temp_min", "wind")
WORDS = ("yes", "no")
# no place on Earth has a median daily high above ~38 C (the hottest, Dallol, about 41 in its
# warmest months): a file's median above this is in degrees F (any place warmer than 4.4 C)
HOTTEST_MEDIAN_HIGH_C = 40.0
FLIPPED_RAIN_MM = 5.0  # today's rain on a changed dry day: a plainly wet day (Seattle's median wet day is ~5 mm)
LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d): rain (-?\d+\.\d) mm, high (-?\d+\.\d) C, low (-?\d+\.\d) C(?:, wind (-?\d+\.\d) m/s)?$"
)
# NOAA's daily element codes (GHCN-Daily, as Climate Data Online exports them): our names
NOAA = {"prcp": "precipitation", "tmax": "temp_max", "tmin": "temp_min", "awnd": "wind"}
# a file's units to the prompt's (mm, degrees C, m/s): NOAA's "standard" is inches, F, mph
TO_METRIC = {
    "precipitation": lambda v: v * 25.4,
    "temp_max": lambda v: (v - 32) * 5 / 9,
    "temp_min": lambda v: (v - 32) * 5 / 9,
    "wind": lambda v: v * 0.44704,
}


def render(place: str, rows: pd.DataFrame, rain_mm: float) -> str:
    """The prompt of a state whose shown days are ``rows`` (the last one is today)."""
    lines = [
        f"{d:%Y-%m-%d}: rain {p:.1f} mm, high {hi:.1f} C, low {lo:.1f} C"
        + ("" if np.isnan(w) else f", wind {w:.1f} m/s")  # a record without wind shows none
        for d, p, hi, lo, w in zip(rows["date"], *(rows[c] for c in COLUMNS), strict=True)
    ]
    return "\n".join(
        [
            f"Weather in {place}, one day a line, oldest first, up to today:",
            *lines,
            f"Will it rain tomorrow (more than {rain_mm:g} mm)? Answer with yes or no as the first word, "
            "then one short reason.",
        ]
    )


def read(path: str, units: str | None = None, faults: dict | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The weather table at ``path`` (CSV or Parquet) in the prompt's units: date and COLUMNS,
    one row a day, in order (wind NaN where the file has none), a ``filled`` flag on the rows
    whose readings weather.faults.missing carried forward, and the log's lines saying what was
    read and done. Columns by our names or NOAA's codes (PRCP, TMAX, TMIN, AWND), any case."""
    faults = {"missing": "error", "ffill_limit": 3, **(faults or {})}
    raw = files.read_table(path, "weather file", "weather.path")
    raw.columns = [str(c).strip().lower() for c in raw.columns]
    coded = [c for c in NOAA if c in raw.columns and NOAA[c] not in raw.columns]
    raw = raw.rename(columns={c: NOAA[c] for c in coded})
    if coded and units is None:
        raise HitchhikerError(
            f"weather file {path} has NOAA's columns ({', '.join(c.upper() for c in coded)}): set weather.units to "
            "standard (inches, F, mph: the export's default) or metric, as the export was made"
        )
    missing = [c for c in ("date", *COLUMNS) if c not in raw.columns and c != "wind"]
    if missing:
        raise HitchhikerError(
            f"weather file {path}: no column {', '.join(missing)} (columns: {', '.join(raw.columns)})"
        )
    if "wind" not in raw.columns:
        raw["wind"] = np.nan
    table = raw[["date", *COLUMNS]].copy()
    # the reader every data file shares: the day in its own zone, day or month first as the
    # whole column says, an unreadable date named with its row
    at = dated.read_times(table["date"], f"weather file {path}")
    table["date"] = at.dt.normalize()
    for c in COLUMNS:
        if pd.api.types.is_numeric_dtype(table[c]):
            values = table[c].astype(float)
            bad = np.isinf(values)
        else:  # text: a blank is a missing reading, anything else must read as a number
            text = table[c].astype("string").str.strip()
            values = pd.to_numeric(text.mask(text == ""), errors="coerce").astype(float)
            bad = (values.isna() & text.notna() & (text != "")).to_numpy() | np.isinf(values.fillna(0)).to_numpy()
        if bad.any():
            day, given = table["date"][bad].iloc[0].date(), table[c][bad].iloc[0]
            raise HitchhikerError(f"weather file {path}: {c} on {day} is {str(given)!r}, not a number")
        table[c] = values.astype(float)
        if units == "standard":
            table[c] = TO_METRIC[c](table[c])
    high = table["temp_max"].median()
    if units != "standard" and high > HOTTEST_MEDIAN_HIGH_C:
        raise HitchhikerError(
            f"weather file {path}: the median daily high is {high:.1f}, hotter than any place's in degrees C: "
            "it reads as degrees F; set weather.units to standard (inches, F, mph)"
        )
    notes = [f"units: {units or 'metric'} (mm, C, m/s in the prompts)"] if units == "standard" else []
    order = table["date"].argsort(kind="stable")
    table, at = table.iloc[order].reset_index(drop=True), at.iloc[order].reset_index(drop=True)
    step = table["date"].diff().dt.days
    if (step == 0).any():
        day = table["date"][step == 0].iloc[0]
        times = at[table["date"] == day].drop_duplicates()
        if len(times) > 1:
            raise HitchhikerError(
                f"weather file {path}: readings at {times.iloc[0]:%H:%M} and at {times.iloc[1]:%H:%M} on "
                f"{day.date()}: several a day; the environment reads one row a day (the day's rain, high, low "
                "and wind), so save the daily summary"
            )
        raise HitchhikerError(f"weather file {path}: two rows for {day.date()}")
    today = pd.Timestamp.now().normalize()
    if table["date"].iloc[-1] > today:  # a day that has not happened: a wrong year, or simulated data
        later = table["date"][table["date"] > today]
        raise HitchhikerError(
            f"weather file {path}: {len(later)} days dated after today ({today.date()}), the first "
            f"{later.iloc[0].date()}; a decision's outcome must have happened (check the year, or the day and "
            "month order)"
        )
    # a day the file does not hold is a row of blank readings: both are missing readings
    days = pd.date_range(table["date"].iloc[0], table["date"].iloc[-1], freq="D")
    absent = len(days) - len(table)
    table = table.set_index("date").reindex(days).rename_axis("date").reset_index()
    measured = [c for c in COLUMNS if c != "wind" or table[c].notna().any()]
    blank = table[measured].isna()
    table["filled"] = blank.any(axis=1)
    if blank.any(axis=None):
        row = int(blank.any(axis=1).to_numpy().argmax())
        column = blank.columns[blank.iloc[row].to_numpy()][0]
        what = f"{int(table['filled'].sum())} days: {absent} absent from the file, the rest with blank cells"
        if faults["missing"] == "error":
            raise HitchhikerError(
                f"weather file {path}: {column} on {table['date'][row].date()} is missing ({what}); set "
                "weather.faults.missing: ffill to carry the day before forward"
            )
        runs = blank.apply(lambda col: col.groupby((~col).cumsum()).transform("sum")).max(axis=None)
        if runs > faults["ffill_limit"]:
            raise HitchhikerError(
                f"weather file {path}: {int(runs)} days in a row without a reading (weather.faults.ffill_limit "
                f"= {faults['ffill_limit']})"
            )
        table[measured] = table[measured].ffill()
        if table[measured].iloc[0].isna().any():
            raise HitchhikerError(
                f"weather file {path}: {column} on {table['date'][0].date()}, the first day, is missing: no day "
                "before it to carry forward (start the file a day later)"
            )
        notes.append(
            f"missing readings on {int(table['filled'].sum())} days ({absent} absent from the file), carried forward "
            "from the day before (weather.faults.missing: ffill); a filled day is never an outcome"
        )
    return table, notes


def rain_cutoff(train: pd.DataFrame) -> float:
    """The rain today (mm, ``rain_today_mm``) above which "yes" best told the next day's rain
    (``rain``) on the train split's days: persistence's rule with its cut-off fitted. On
    Seattle's 911 train days 0.3 mm scored 0.728 against persistence's 0.718 (above 0 mm).
    The smallest of equally good cut-offs, -inf (always yes) among them."""
    today, tomorrow = train["rain_today_mm"].to_numpy(dtype=float), train["rain"].to_numpy(dtype=bool)
    cuts = np.r_[-np.inf, np.unique(today)]
    right = [((today > c) == tomorrow).sum() for c in cuts]
    return float(cuts[int(np.argmax(right))])


class Weather(Environment):
    """Will it rain tomorrow? environments/base.py documents each method."""

    name = "weather"
    reads_reasons = True
    data_name = "weather"
    data_columns = ("date", *COLUMNS)
    outcome_columns = ("rain",)
    practice_reasons = ("because of the last days' rain.", "because of the last days' weather.")
    config_schema: ClassVar[dict] = {
        "type": "object",
        "additionalProperties": False,
        "default": {},
        "description": "The weather environment's own keys (environment = weather).",
        "properties": {
            "path": {
                "type": ["string", "null"],
                "default": None,
                "description": (
                    "A CSV or Parquet of daily weather: date, precipitation, temp_max, temp_min and, if "
                    "measured, wind, by these names or NOAA's codes (DATE, PRCP, TMAX, TMIN, AWND), one row a "
                    "day, in weather.units; null: the bundled Seattle record, 2012-2015."
                ),
            },
            "units": {
                "enum": [None, "metric", "standard"],
                "default": None,
                "description": (
                    "The file's units, converted to the prompts' (mm, degrees C, m/s): metric, or standard "
                    "(inches, degrees F, mph: NOAA Climate Data Online's default export). null: metric, except "
                    "for a file with NOAA's column codes (PRCP, TMAX, TMIN), which must say."
                ),
            },
            "faults": {
                "type": "object",
                "additionalProperties": False,
                "default": {},
                "description": "What a file's missing readings get, as market.data.faults for prices.",
                "properties": {
                    "missing": {
                        "enum": ["ffill", "error"],
                        "default": "ffill",
                        "description": (
                            "A blank reading or a day the file does not hold: ffill carries the day before "
                            "forward (at most ffill_limit days in a row; a filled day is shown in prompts but "
                            "never scored as an outcome); error refuses the file, naming the day."
                        ),
                    },
                    "ffill_limit": {
                        "type": "integer",
                        "minimum": 1,
                        "default": 3,
                        "description": "Longest run of missing days ffill may fill; a longer gap is an error.",
                    },
                },
            },
            "place": {
                "type": "string",
                "minLength": 1,
                "default": "Seattle",
                "description": "Where the weather was recorded, as the prompt names it.",
            },
            "rain_mm": {
                "type": "number",
                "minimum": 0,
                "default": 0,
                "description": "Tomorrow counts as rain when its precipitation is above this many millimetres.",
            },
        },
    }

    # -- data ---------------------------------------------------------------------------

    def data_files(self, cfg: dict) -> list[str]:
        return [cfg["weather"]["path"] or str(BUNDLED)]

    def describe_data(self, cfg: dict) -> str:
        path, units = cfg["weather"]["path"], cfg["weather"]["units"]
        if not path:
            return f"weather, the bundled {BUNDLED.relative_to(BUNDLED.parents[1])}"
        return f"weather file {path}, in " + (
            "standard units (inches, F, mph: converted to mm, C, m/s)" if units == "standard" else "mm, C and m/s"
        )

    def fetch(self, cfg: dict) -> tuple[pd.DataFrame, list[str]]:
        own = cfg["weather"]
        table, notes = read(self.data_files(cfg)[0], own["units"], own["faults"])
        first, last = table["date"].iloc[0].date(), table["date"].iloc[-1].date()
        return table, [f"{self.describe_data(cfg)}: {len(table)} days, {first} .. {last}", *notes]

    def check_config(self, cfg: dict) -> None:
        st = cfg.get("states", {})
        if st.get("horizon", 1) != 1:
            raise HitchhikerError(
                f"config key states.horizon = {st['horizon']}: the weather environment forecasts tomorrow (set 1)"
            )

    def _decisions(self, table: pd.DataFrame, cfg: dict) -> dict[str, np.ndarray]:
        """Each split's decision-day positions (environments/dated.py): states.window days up to
        it, a next day, the stride, the embargo before the next split, a seeded draw of max_states."""
        st, dates = cfg["states"], table["date"]
        out = dated.decision_days(dates, st, history=st["window"] - 1, ahead=1)
        if "filled" in table:  # a day whose readings were carried forward is never an outcome
            filled = table["filled"].to_numpy(dtype=bool)
            out = {split: days[~filled[days + 1]] for split, days in out.items()}
        for split, days in out.items():
            if not len(days):
                raise HitchhikerError(
                    f"config key states.{split}: no decision date in {st[split]['start']} .. {st[split]['end']} with "
                    f"{st['window']} days up to it, a next day and the embargo before the next split (the weather runs "
                    f"{dates.iloc[0].date()} .. {dates.iloc[-1].date()})"
                )
        return dated.draw(out, st, cfg.get("seed", 0))

    def check_data(self, prices: pd.DataFrame, cfg: dict) -> None:
        self._decisions(prices, cfg)

    # -- states and outcomes ------------------------------------------------------------

    def make_states(self, prices, cfg, fits):
        st, own = cfg["states"], cfg["weather"]
        table = prices.reset_index(drop=True)
        rain = table["precipitation"].to_numpy() > own["rain_mm"]
        states, outcomes = [], []
        for split, days in self._decisions(table, cfg).items():
            prompts = [""] * len(days)
            pending = np.arange(len(days))
            for shown in range(st["window"], 0, -1):  # trim the oldest days until the prompt fits
                texts = [render(own["place"], table.iloc[max(0, days[i] - shown + 1) : days[i] + 1], own["rain_mm"])
                         for i in pending]  # fmt: skip
                ok = np.asarray(fits(texts, st["max_prompt_tokens"]), dtype=bool)
                for i, text in zip(pending[ok], np.asarray(texts, dtype=object)[ok], strict=True):
                    prompts[i] = text
                pending = pending[~ok]
                if not len(pending):
                    break
            if len(pending):
                raise HitchhikerError(
                    f"config key states.max_prompt_tokens = {st['max_prompt_tokens']}: too few for a weather prompt "
                    "of even one day"
                )
            date = table["date"].to_numpy()[days]
            ids = [hashlib.sha256(f"rain\x1f{d:%Y-%m-%d}\x1f{p}".encode()).hexdigest()[:16]
                   for d, p in zip(pd.DatetimeIndex(date), prompts, strict=True)]  # fmt: skip
            base = {"state_id": ids, "split": split, "format": "rain"}
            states.append(
                pd.DataFrame(
                    {
                        **base,
                        "date": date,
                        "horizon": 1,
                        "prompt": prompts,
                        "rain_today": rain[days],
                        "rain_today_mm": table["precipitation"].to_numpy(dtype=float)[days],  # threshold's
                    }
                )
            )
            outcomes.append(
                pd.DataFrame(
                    {
                        **base,
                        "outcome_date": table["date"].to_numpy()[days + 1],
                        "precipitation": table["precipitation"].to_numpy()[days + 1],
                        "rain": rain[days + 1],
                    }
                )
            )
        return pd.concat(states, ignore_index=True), pd.concat(outcomes, ignore_index=True)

    def audit(self, prices, states, outcomes, cfg) -> dict:
        """Independent of make_states: each prompt's lines are read back with a regular
        expression and each compared with the table's row of its date, which must be on or
        before the state's date; the last shown day must be the state's date; the outcome
        must be the first row after it; the splits must follow each other, an embargo apart."""
        rain_mm = cfg["weather"]["rain_mm"]
        rows = prices.set_index("date")
        after = {d: n for d, n in zip(prices["date"].iloc[:-1], prices["date"].iloc[1:], strict=True)}
        out = outcomes.set_index("state_id")
        for state in states.itertuples(index=False):
            day = pd.Timestamp(state.date)
            shown = [LINE.match(line) for line in state.prompt.splitlines()[1:-1]]
            if not shown or not all(shown):
                raise HitchhikerError(
                    f"audit: state {state.state_id} ({day.date()}): a prompt line is not a day's weather"
                )
            for m in shown:
                when = pd.Timestamp(m[1])
                if when > day:
                    raise HitchhikerError(
                        f"audit: state {state.state_id} ({day.date()}) shows {when.date()}, a later day"
                    )
                want = rows.loc[when, list(COLUMNS)].to_numpy(dtype=float)
                got = np.array([np.nan if v is None else float(v) for v in m.groups()[1:]])  # no wind: none shown
                if (np.isnan(got) != np.isnan(want)).any() or np.nanmax(np.abs(got - want)) > 0.05 + 1e-9:
                    raise HitchhikerError(
                        f"audit: state {state.state_id} ({day.date()}): its line for {when.date()} is not the data's"
                    )
            if pd.Timestamp(shown[-1][1]) != day:
                raise HitchhikerError(f"audit: state {state.state_id} ({day.date()}) does not end on its own day")
            o = out.loc[state.state_id]
            nxt = after.get(day)
            if nxt is None or pd.Timestamp(o["outcome_date"]) != nxt:
                raise HitchhikerError(
                    f"audit: state {state.state_id} ({day.date()}): its outcome is not the next day's"
                )
            if "filled" in rows and bool(rows.loc[nxt, "filled"]):
                raise HitchhikerError(
                    f"audit: state {state.state_id} ({day.date()}): its outcome is a day whose readings were filled"
                )
            if bool(o["rain"]) != bool(rows.loc[nxt, "precipitation"] > rain_mm):
                raise HitchhikerError(
                    f"audit: state {state.state_id} ({day.date()}): its outcome is not the data's rain"
                )
        states = states.reset_index(drop=True)
        pos = pd.Index(prices["date"]).get_indexer(pd.DatetimeIndex(states["date"]))
        ends = out.loc[states["state_id"], "outcome_date"].to_numpy()
        splits = dated.splits_report(states, ends, pos, cfg["states"], "calendar day")
        return {"states_checked": len(states), "frequency": "daily", "period": "calendar day", **splits}

    # -- answers ------------------------------------------------------------------------

    def score(self, samples, states, outcomes, reward_cfg):
        from hitchhiker.environments import weather_reasons  # here: a code input of the stages that score

        rain = outcomes.set_index("state_id")["rain"].reindex(samples["state_id"]).to_numpy(dtype=bool)
        text = samples["completion"].astype(str).str.strip()
        first = text.str.split(n=1).str[0].fillna("").str.strip(".,:;!?\"'").str.lower()
        valid = first.isin(WORDS).to_numpy()
        right = (first.to_numpy() == "yes") == rain
        reason = np.where(text.to_numpy() == "", "empty answer", "first word is not yes or no")
        answer = pd.array(np.where(valid, first.to_numpy(), None), dtype="string")
        prompts = states.set_index("state_id")["prompt"].reindex(samples["state_id"]).tolist()
        checked = weather_reasons.check_many(samples["completion"], prompts, pd.Series(answer, index=samples.index))
        unsupported = checked[list(weather_reasons.KINDS)].sum(axis=1)
        held = checked["reason_supported"].fillna(0).to_numpy() == 1  # true rain statements count as supported
        return pd.DataFrame(
            {
                "valid": valid,
                # typed text: a round with no invalid answer still stores a text column
                "invalid_reason": pd.array(np.where(valid, None, reason), dtype="string"),
                "reward": np.where(valid, right.astype(float), reward_cfg["invalid_penalty"]),
                "answer": answer,
                "correct": np.where(valid, right.astype(float), np.nan),
                "claims": checked["figures"],
                "unsupported_claims": unsupported,
                "supported_claims": checked["figures"] - checked["figure"] + held,
                **{k: checked[k] for k in weather_reasons.KINDS},
                "reason_consistency": checked["reason_consistency"],
                "reason_supported": checked["reason_supported"],
            },
            index=samples.index,
        )

    def claim_rates(self, scored: pd.DataFrame) -> pd.DataFrame:
        from hitchhiker.environments import weather_reasons  # here: see score

        return weather_reasons.indicators(scored)

    def counterfactual(self, states: pd.DataFrame, cfg: dict) -> pd.DataFrame:
        """Today's rain flipped: a wet day (above weather.rain_mm) shown dry (0.0 mm), a dry
        one wet (FLIPPED_RAIN_MM, or just above rain_mm where that is higher)."""
        rain_mm = cfg["weather"]["rain_mm"]
        wet = max(FLIPPED_RAIN_MM, np.ceil((rain_mm + 0.1) * 10) / 10)

        def flip(prompt: str, today: bool) -> str:
            lines = prompt.splitlines()
            lines[-2] = re.sub(r"rain -?\d+\.\d mm", f"rain {0.0 if today else wet:.1f} mm", lines[-2], count=1)
            return "\n".join(lines)

        today = states["rain_today"].to_numpy(dtype=bool)
        return states.assign(
            prompt=[flip(p, t) for p, t in zip(states["prompt"], today, strict=True)],
            rain_today=~today,
            rain_today_mm=np.where(today, 0.0, wet),
        )

    def follows(self, answered: pd.DataFrame, changed: pd.DataFrame, states: pd.DataFrame) -> pd.Series:
        """1.0 where the answer moved to what the changed today says (yes where it now rained,
        no where it is now dry), from the other answer; NaN where either is invalid."""
        now_wet = states.set_index("state_id")["rain_today"].reindex(answered["state_id"]).to_numpy(dtype=bool)
        expected = np.where(now_wet, "yes", "no")
        before, after = (a["answer"].astype(object).fillna("").to_numpy(dtype=str) for a in (answered, changed))
        moved = (after == expected) & (before != expected)
        return pd.Series(np.where((before == "") | (after == ""), np.nan, moved), index=answered.index)

    def action_rewards(self, outcomes: pd.DataFrame, reward_cfg: dict) -> pd.DataFrame:
        rain = np.repeat(outcomes["rain"].to_numpy(dtype=bool), 2)
        action = np.tile(WORDS, len(outcomes))
        return pd.DataFrame(
            {
                "state_id": np.repeat(outcomes["state_id"].to_numpy(), 2),
                "action": action,
                "reward": ((action == "yes") == rain).astype(float),
            }
        )

    def answer_metrics(self, scored: pd.DataFrame, block: int, seed: int) -> dict:
        said = scored.loc[scored["valid"].astype(bool)]
        mean, lo, hi = metrics.block_bootstrap_ci((said["answer"] == "yes").astype(float), said["date"], block, seed)
        return {"yes_rate": {"mean": mean, "ci95": [lo, hi], "n": len(said)}}

    def baselines(self, states, outcomes, reward_cfg, train):
        """climatology, persistence, threshold and never, rewarded as an answer: 1 when right,
        else 0. climatology is fitted on the train split's outcomes, threshold on its days."""
        if "rain_today_mm" not in states:
            raise HitchhikerError(
                "states.parquet has no rain_today_mm (written before the threshold baseline): rebuild the states "
                "(snakemake --forcerun build_states)"
            )
        out = outcomes.set_index("state_id")
        trained = out[out["split"] == "train"]
        month_rate = trained.groupby(pd.DatetimeIndex(trained["outcome_date"]).month)["rain"].mean()
        months = (pd.DatetimeIndex(states["date"]) + pd.Timedelta(days=1)).month  # tomorrow's (a calendar fact)
        rain = out.loc[states["state_id"], "rain"].to_numpy(dtype=bool)
        cutoff = rain_cutoff(train.assign(rain=out.loc[train["state_id"], "rain"].to_numpy(dtype=bool)))
        says = {
            "climatology": month_rate.reindex(months).fillna(0.0).to_numpy() > 0.5,
            "persistence": states["rain_today"].to_numpy(dtype=bool),
            "threshold": states["rain_today_mm"].to_numpy(dtype=float) > cutoff,
            "never": np.zeros(len(states), bool),
        }
        return pd.concat(
            [
                pd.DataFrame(
                    {
                        "baseline": name,
                        "state_id": states["state_id"].to_numpy(),
                        "date": states["date"].to_numpy(),
                        "reward": (yes == rain).astype(float),
                    }
                )
                for name, yes in says.items()
            ],
            ignore_index=True,
        )

    # -- the tiny model's warm-up -------------------------------------------------------

    def practice_turn(self, cfg: dict, rng: np.random.Generator, i: int) -> tuple[str, list[str]]:
        n = int(rng.integers(1, 11))
        rows = pd.DataFrame(
            {
                "date": pd.Timestamp("2000-01-01") + pd.to_timedelta(rng.integers(0, 9000) + np.arange(n), "D"),
                "precipitation": np.where(rng.random(n) < 0.5, 0.0, rng.gamma(1.0, 5.0, n)),
                "temp_max": rng.normal(16, 7, n),
                "temp_min": rng.normal(8, 5, n),
                "wind": rng.gamma(3.0, 1.0, n),
            }
        )
        own = cfg.get("weather", {})
        return render(own.get("place", "Seattle"), rows, own.get("rain_mm", 0)), list(WORDS)


ENVIRONMENT = Weather()
