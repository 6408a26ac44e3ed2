"""The weather environment (environments/weather.py): a non-market decision through the
same contract: its data, states, audit, score, priced actions, baselines and config section;
and once through every stage of the DAG (slow)."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, run, tiny_config, write_config
from hitchhiker import config, environments
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import weather

ENV = environments.get("weather")
REWARD = {"benchmark": "none", "cost_bps": 0, "invalid_penalty": -0.05, "returns": "simple"}


def weather_config(**states) -> dict:
    cfg = tiny_config(run="weather", environment="weather")
    cfg["states"] = {
        "horizon": 1,
        "window": 4,
        "stride": 3,
        "train": {"start": "2012-01-01", "end": "2013-12-31", "max_states": 40},
        "test": {"start": "2014-03-01", "end": "2015-12-30", "max_states": 20},
        **states,
    }
    return config.validate(cfg)


def built(cfg=None):
    cfg = cfg or weather_config()
    table, _ = ENV.fetch(cfg)
    states, outcomes = ENV.make_states(table, cfg, lambda texts, budget: np.ones(len(texts), bool))
    return cfg, table, states, outcomes


def test_the_bundled_record_is_read_whole_and_its_section_gets_its_defaults():
    cfg = weather_config()
    assert cfg["weather"] == {"path": None, "place": "Seattle", "rain_mm": 0, "units": None,
                              "faults": {"missing": "ffill", "ffill_limit": 3}}  # fmt: skip
    table, notes = ENV.fetch(cfg)
    assert len(table) == 1461 and table.date.is_monotonic_increasing and table.date.diff().dt.days.max() == 1
    assert list(table.columns) == ["date", *weather.COLUMNS, "filled"] and not table.filled.any()
    assert notes == ["weather, the bundled data/seattle_weather.csv: 1461 days, 2012-01-01 .. 2015-12-31"]
    assert ENV.data_files(cfg) == [str(weather.BUNDLED)]


def test_each_prompt_shows_the_window_up_to_its_day_and_the_outcome_is_the_next_days_rain():
    cfg, table, states, outcomes = built()
    assert states.groupby("split").size().to_dict() == {"test": 20, "train": 40}
    rows = table.set_index("date")
    for state, outcome in zip(states.itertuples(), outcomes.itertuples(), strict=True):
        lines = state.prompt.splitlines()
        assert lines[0] == "Weather in Seattle, one day a line, oldest first, up to today:"
        days = [pd.Timestamp(line[:10]) for line in lines[1:-1]]
        assert days == list(pd.date_range(end=state.date, periods=4))  # the window, ending today
        today = rows.loc[state.date]
        assert lines[-2] == (
            f"{state.date:%Y-%m-%d}: rain {today.precipitation:.1f} mm, high {today.temp_max:.1f} C, "
            f"low {today.temp_min:.1f} C, wind {today.wind:.1f} m/s"
        )
        assert outcome.state_id == state.state_id and outcome.outcome_date == state.date + pd.Timedelta(days=1)
        assert outcome.rain == (rows.loc[outcome.outcome_date].precipitation > 0)
        assert state.rain_today == (today.precipitation > 0) and state.rain_today_mm == today.precipitation
    train_last, test_first = states[states.split == "train"].date.max(), states[states.split == "test"].date.min()
    assert train_last < test_first
    assert ENV.audit(table, states, outcomes, cfg) == {
        "states_checked": 60,
        "frequency": "daily",
        "period": "calendar day",
        "train_to_test": {
            "last_outcome": str((train_last + pd.Timedelta(days=1)).date()),
            "embargo_periods": (test_first - train_last).days,
        },
        "train_dates": [str(states[states.split == "train"].date.min().date()), str(train_last.date())],
        "test_dates": [str(test_first.date()), str(states[states.split == "test"].date.max().date())],
    }
    again = built(cfg)[2]
    assert again.state_id.tolist() == states.state_id.tolist()  # seeded, stable ids
    wider = {**cfg, "states": {**cfg["states"], "embargo": 10_000}}  # the splits' order, audited as the market's
    with pytest.raises(HitchhikerError, match=r"leakage audit: train outcomes reach .* calendar days apart, embargo"):
        ENV.audit(table, states, outcomes, wider)


@pytest.mark.parametrize("fault", ["a later day shown", "a value edited", "outcome of another day", "rain flipped"])
def test_the_audit_fails_in_one_line_on_leakage_or_a_wrong_outcome(fault):
    cfg, table, states, outcomes = built()
    states, outcomes = states.copy(), outcomes.copy()
    i = 5
    day, nxt = states.date[i], states.date[i] + pd.Timedelta(days=1)
    if fault == "a later day shown":  # the prompt's last line moved to tomorrow, with tomorrow's weather
        row = table.set_index("date").loc[nxt]
        line = (f"{nxt:%Y-%m-%d}: rain {row.precipitation:.1f} mm, high {row.temp_max:.1f} C, "
                f"low {row.temp_min:.1f} C, wind {row.wind:.1f} m/s")  # fmt: skip
        lines = states.prompt[i].splitlines()
        states.loc[i, "prompt"] = "\n".join([*lines[:-1], line, lines[-1]])
        want = "shows .* a later day"
    elif fault == "a value edited":
        states.loc[i, "prompt"] = states.prompt[i].replace(", high ", ", high 1", 1)
        want = "its line for .* is not the data's"
    elif fault == "outcome of another day":
        outcomes.loc[i, "outcome_date"] = day + pd.Timedelta(days=2)
        want = "its outcome is not the next day's"
    else:
        outcomes.loc[i, "rain"] = not outcomes.rain[i]
        want = "its outcome is not the data's rain"
    with pytest.raises(HitchhikerError, match=f"audit: state {states.state_id[i]} \\({day.date()}\\).*{want}"):
        ENV.audit(table, states, outcomes, cfg)


def test_score_reads_the_first_word_and_pays_one_for_a_right_answer():
    _, _, states, outcomes = built()
    rainy = outcomes[outcomes.rain].state_id.iloc[0]
    dry = outcomes[~outcomes.rain].state_id.iloc[0]
    samples = pd.DataFrame(
        {
            "state_id": [rainy, rainy, dry, dry, dry, dry],
            "completion": ["Yes, it rained all week.", "no because", "NO.", "yes", "maybe", "  "],
        },
        index=[10, 11, 12, 13, 14, 15],
    )
    scored = ENV.score(samples, states, outcomes, REWARD)
    assert scored.index.tolist() == samples.index.tolist()
    assert scored.reward.tolist() == [1.0, 0.0, 1.0, 0.0, -0.05, -0.05]
    assert scored.valid.tolist() == [True] * 4 + [False] * 2
    assert scored.correct.tolist()[:4] == [1.0, 0.0, 1.0, 0.0] and scored.correct.loc[14:].isna().all()
    assert scored.invalid_reason.loc[14:].tolist() == ["first word is not yes or no", "empty answer"]
    # "it rained all week": a rain statement about the days shown, true where one of them rained,
    # arguing for the yes given; the rest argue nothing
    assert (scored.unsupported_claims == 0).all() and scored.supported_claims.tolist() == [1, 0, 0, 0, 0, 0]
    assert scored.reason_consistency.fillna(9).tolist() == [1, 0, 0, 0, 9, 9]


def test_every_action_is_priced_as_score_pays_its_answer():
    _, _, states, outcomes = built()
    priced = ENV.action_rewards(outcomes, REWARD)
    assert len(priced) == 2 * len(outcomes) and set(priced.action) == {"yes", "no"}
    samples = priced.rename(columns={"action": "completion"})[["state_id", "completion"]]
    assert ENV.score(samples, states, outcomes, REWARD).reward.tolist() == priced.reward.tolist()
    cfg = weather_config()
    cfg["train"]["objective"] = "full_information"
    config.validate(cfg)  # the weather environment prices every action: full_information applies


def test_baselines_answer_from_the_past_only():
    _, _, states, outcomes = built()
    test = states[states.split == "test"].reset_index(drop=True)
    train = states[states.split == "train"]
    rows = ENV.baselines(test, outcomes, REWARD, train)
    assert set(rows.baseline) == {"climatology", "persistence", "threshold", "never"}
    rain = outcomes.set_index("state_id").rain[test.state_id].to_numpy()
    persistence = rows[rows.baseline == "persistence"].reward.to_numpy()
    assert (persistence == (test.rain_today.to_numpy() == rain)).all()
    assert (rows[rows.baseline == "never"].reward.to_numpy() == ~rain).all()
    # climatology reads the train split's outcomes only: the test outcomes flipped, its answers stay
    flipped = outcomes.assign(rain=np.where(outcomes.split == "test", ~outcomes.rain, outcomes.rain))
    said = rows[rows.baseline == "climatology"].reward.to_numpy() == rain  # 1 where it said what happened
    again = ENV.baselines(test, flipped, REWARD, train)
    for name in ("climatology", "threshold"):
        said = rows[rows.baseline == name].reward.to_numpy() == rain  # 1 where it said what happened
        assert ((again[again.baseline == name].reward.to_numpy() == ~rain) == said).all()
    # threshold: yes above the train days' best cut-off of today's rain, by hand
    wet = outcomes.set_index("state_id").rain[train.state_id].to_numpy()
    cut = weather.rain_cutoff(train.assign(rain=wet))
    right = lambda c: ((train.rain_today_mm.to_numpy() > c) == wet).sum()  # noqa: E731
    assert all(right(cut) >= right(c) for c in [-np.inf, *train.rain_today_mm])
    said = rows[rows.baseline == "threshold"].reward.to_numpy()
    assert (said == ((test.rain_today_mm.to_numpy() > cut) == rain)).all()
    with pytest.raises(HitchhikerError, match=r"states\.parquet has no rain_today_mm"):
        ENV.baselines(test.drop(columns="rain_today_mm"), outcomes, REWARD, train)


def test_the_threshold_is_the_train_days_best_cut_off_of_todays_rain():
    days = pd.DataFrame({"rain_today_mm": [0.0, 0.0, 0.4, 0.8, 1.0, 2.5, 6.0, 9.0],
                         "rain": [False, False, False, False, False, True, True, True]})  # fmt: skip
    assert weather.rain_cutoff(days) == 1.0  # 8 of 8 right; persistence (above 0 mm) 5
    assert weather.rain_cutoff(days.assign(rain=True)) == -np.inf  # always yes, the smallest of the best
    assert weather.rain_cutoff(days.assign(rain=days.rain_today_mm > 0)) == 0.0  # persistence's own


def _file(path, frame):
    frame.to_csv(path, index=False)
    return str(path)


def test_a_users_own_file_and_its_faults_are_one_line(tmp_path):
    days = pd.date_range("2020-01-01", periods=30)
    good = pd.DataFrame({"Date": days.strftime("%Y/%m/%d"), "Precipitation": 1.0, "Temp_Max": 10.0,
                         "temp_min": 2.0, "wind": 3.0, "weather": "rain"})  # fmt: skip
    cfg = weather_config(train={"start": "2020-01-01", "end": "2020-01-15"},
                         test={"start": "2020-01-20", "end": "2020-01-29"})  # fmt: skip
    cfg["weather"]["path"] = _file(tmp_path / "w.csv", good)
    table, _ = ENV.fetch(cfg)
    assert len(table) == 30 and table.date.iloc[0] == days[0]
    ENV.check_data(table, cfg)
    faults = {
        "no such file": (None, "config key weather.path: .*nope.csv does not exist"),
        "a column missing": (good.drop(columns="temp_min"), "no column temp_min"),
        "a value not a number": (good.assign(wind=["x", *[3.0] * 29]), "wind on 2020-01-01 is 'x', not a number"),
        "a blank first reading": (good.assign(wind=[None, *[3.0] * 29]), "wind on 2020-01-01, the first day, is"),
        "a week without rain measured": (
            good.assign(Precipitation=[1.0] * 5 + [None] * 7 + [1.0] * 18),
            "7 days in a row without a reading",
        ),
        "two rows a day": (pd.concat([good, good.iloc[[3]]]), "two rows for 2020-01-04"),
        "degrees F, units not said": (
            good.assign(Temp_Max=48.0, temp_min=36.0),
            r"the median daily high is 48.0, hotter than any place's in degrees C: it reads as degrees F; set weather",
        ),
        "days after today": (
            good.assign(Date=pd.date_range(pd.Timestamp.now().normalize(), periods=30).strftime("%Y/%m/%d")),
            r"29 days dated after today \(.*\), the first .*; a decision's outcome must have happened",
        ),
        "readings through the day": (
            pd.concat([good.replace({"2020/01/04": "2020/01/04 06:00"}), good[3:4].assign(Date="2020/01/04 18:00")]),
            "readings at 06:00 and at 18:00 on 2020-01-04: several a day; .* so save the daily summary",
        ),
    }
    for name, (frame, message) in faults.items():
        cfg["weather"]["path"] = str(tmp_path / "nope.csv") if frame is None else _file(tmp_path / f"{name}.csv", frame)
        with pytest.raises(HitchhikerError, match=message):
            ENV.fetch(cfg)
    files = {  # the file as saved, not as a frame
        "w.xlsx": (b"PK\x03\x04 a zipped workbook", "a spreadsheet is not read; save the sheet as CSV"),
        "latin1.csv": ("date,rain caf\xe9\n2020-01-01,1\n".encode("latin-1"), r"not UTF-8 text \(it holds byte 0xe9\)"),
        "empty.csv": (b"", "weather file .*empty.csv is empty"),
    }
    for name, (raw, message) in files.items():
        (tmp_path / name).write_bytes(raw)
        cfg["weather"]["path"] = str(tmp_path / name)
        with pytest.raises(HitchhikerError, match=message):
            ENV.fetch(cfg)
    cfg["weather"]["path"] = str(tmp_path)
    with pytest.raises(HitchhikerError, match=r"config key weather.path: .* is a directory: name a CSV or Parquet"):
        ENV.fetch(cfg)
    cfg["weather"]["path"] = _file(tmp_path / "w.csv", good)
    cfg["states"]["test"] = {"start": "2020-01-30", "end": "2020-02-28"}  # no next day after the last row
    with pytest.raises(HitchhikerError, match=r"config key states.test: no decision date in 2020-01-30"):
        ENV.check_data(ENV.fetch(cfg)[0], cfg)


def test_a_missing_day_or_blank_reading_is_carried_forward_never_scored_or_refused_as_asked(tmp_path):
    days = pd.date_range("2020-01-01", periods=40)
    frame = pd.DataFrame({"date": days.strftime("%Y-%m-%d"), "precipitation": np.arange(40) % 3 * 1.0,
                          "temp_max": 10.0, "temp_min": 2.0, "wind": 3.0})  # fmt: skip
    frame.loc[12, "precipitation"] = None  # a blank cell
    frame = frame.drop(index=20)  # a day absent
    cfg = weather_config(window=3, stride=1, train={"start": "2020-01-03", "end": "2020-01-25"},
                         test={"start": "2020-01-28", "end": "2020-02-08"})  # fmt: skip
    cfg["weather"]["path"] = _file(tmp_path / "w.csv", frame)
    table, notes = ENV.fetch(cfg)
    assert len(table) == 40 and table.filled.sum() == 2 and table.precipitation[12] == table.precipitation[11]
    assert "missing readings on 2 days (1 absent from the file), carried forward" in notes[-1]
    states, outcomes = ENV.make_states(table, cfg, lambda texts, budget: np.ones(len(texts), bool))
    assert not set(outcomes.outcome_date) & {days[12], days[20]}  # a filled day is never an outcome
    ENV.audit(table, states, outcomes, cfg)
    cfg["weather"]["faults"] = {"missing": "error", "ffill_limit": 3}
    with pytest.raises(HitchhikerError, match=r"precipitation on 2020-01-13 is missing \(2 days: 1 absent"):
        ENV.fetch(cfg)


def noaa_export(path, days=1461):
    """The bundled record as NOAA Climate Data Online exports a daily summary: every value
    quoted, STATION and a NAME with a comma, DATE, PRCP in inches and TMAX/TMIN in Fahrenheit
    (its "standard" units), no wind column, a few PRCP cells blank and two days absent."""
    src = pd.read_csv(weather.BUNDLED).head(days)
    out = pd.DataFrame({"STATION": "USW00024233", "NAME": "SEATTLE TACOMA AIRPORT, WA US", "DATE": src["date"],
                        "PRCP": (src["precipitation"] / 25.4).round(3).map(str),
                        "TMAX": (src["temp_max"] * 9 / 5 + 32).round(1).map(str),
                        "TMIN": (src["temp_min"] * 9 / 5 + 32).round(1).map(str)})  # fmt: skip
    out.loc[[40, 90, 91], "PRCP"] = ""
    out = out.drop(index=[150, 260])
    out.to_csv(path, index=False, quoting=1)  # csv.QUOTE_ALL
    return src


def test_a_noaa_export_is_read_in_its_units_once_they_are_declared(tmp_path):
    src = noaa_export(tmp_path / "noaa.csv")
    cfg = weather_config()
    cfg["weather"]["path"] = str(tmp_path / "noaa.csv")
    with pytest.raises(HitchhikerError, match=r"has NOAA's columns \(PRCP, TMAX, TMIN\): set weather.units"):
        ENV.fetch(cfg)
    cfg["weather"]["units"] = "standard"
    table, _ = ENV.fetch(cfg)
    kept = ~table.filled.to_numpy()
    for ours in ("precipitation", "temp_max", "temp_min"):
        assert np.allclose(table[ours][kept], src[ours][kept], atol=0.05), ours  # back in mm and C
    assert table.wind.isna().all() and table.filled.sum() == 5
    states, _ = ENV.make_states(table, cfg, lambda texts, budget: np.ones(len(texts), bool))
    line = states.prompt.iloc[0].splitlines()[1]
    assert weather.LINE.match(line) and "wind" not in line and " mm, high " in line


@pytest.mark.parametrize(
    "written",
    [
        lambda days: days.strftime("%d/%m/%Y"),  # day first, from the 1st: 02/01 is 2 January
        # local midnight across the DST change of 8 March: two offsets in one column
        lambda days: days.tz_localize("America/Los_Angeles").strftime("%Y-%m-%d %H:%M:%S%z"),
    ],
    ids=["day-first", "zoned-across-dst"],
)
def test_a_weather_files_dates_are_read_as_the_market_reads_its_prices(tmp_path, written):
    """(pandas' own parse read 02/01/2020 as February, then refused 13/01/2020 as no date;
    on the zoned file it raised a traceback.)"""
    days = pd.date_range("2020-03-01", periods=30)
    frame = pd.DataFrame({"date": written(days), "precipitation": 1.0, "temp_max": 10.0, "temp_min": 2.0, "wind": 3.0})
    table, _ = weather.read(_file(tmp_path / "w.csv", frame))
    assert list(table.date) == list(days)
    frame.loc[3, "date"] = "March the 4th"
    with pytest.raises(HitchhikerError, match=r"weather file .*w.csv: unreadable date 'March the 4th' in row 4"):
        weather.read(_file(tmp_path / "w.csv", frame))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda c: c["weather"].update(rain=1),
            r"unknown config key weather.rain \(known here: faults, path, place, rain_mm, units\)",
        ),
        (lambda c: c["weather"].update(rain_mm=-1), r"config key weather.rain_mm = -1"),
        (lambda c: c["states"].update(horizon=5), r"states.horizon = 5: the weather environment forecasts tomorrow"),
        (lambda c: c.update(environment="market"), r"unknown config key weather"),
    ],
)
def test_the_weather_section_is_validated_by_the_environments_own_schema(mutate, message):
    cfg = weather_config()
    mutate(cfg)
    with pytest.raises(HitchhikerError, match=message):
        config.validate(cfg)


def test_a_weather_config_needs_no_market_keys_and_a_market_one_still_needs_its_tickers():
    cfg = config.validate(
        {
            "run": "w",
            "environment": "weather",
            "states": {
                "horizon": 1,
                "train": {"start": "2012-01-01", "end": "2013-12-31"},
                "test": {"start": "2014-03-01", "end": "2015-12-30"},
            },
        }
    )
    assert cfg["weather"]["place"] == "Seattle" and "market" not in cfg
    market = {**cfg, "environment": "market"}
    del market["weather"]
    config.validate(market)
    with pytest.raises(HitchhikerError, match=r"^config key market.data.tickers is required: the market environments'"):
        environments.get("market").preflight_data(market)  # before any job, and in fetch_prices


def test_a_stage_gets_the_environments_section_with_the_environment():
    cfg = weather_config()
    cfg["weather"]["place"] = "Seattle, WA"
    given = json.loads(config.subset(cfg, ["run", "environment"]))
    assert config.validate(given, {"run", "environment"})["weather"]["place"] == "Seattle, WA"
    assert "weather" not in json.loads(config.subset(cfg, ["run", "rollout"]))
    config.validate(json.loads(json.dumps(cfg)), {"run", "rollout"})  # a whole file, to a stage that reads neither


@pytest.mark.slow
def test_a_users_weather_file_runs_every_stage_from_another_directory(tmp_path):
    """Through the real DAG with the tiny model: the user's own file (capitalised columns,
    slashed dates, an extra text column), relative to the working directory, outside the
    checkout; two rounds."""
    raw = pd.read_csv(weather.BUNDLED)
    raw.columns = [c.title() for c in raw.columns]
    raw["Date"] = pd.to_datetime(raw["Date"]).dt.strftime("%m/%d/%Y")
    raw.iloc[:800].to_csv(tmp_path / "my weather.csv", index=False)
    cfg = weather_config(
        window=3,
        stride=2,
        train={"start": "2012-01-01", "end": "2013-06-30", "max_states": 24},
        test={"start": "2013-09-01", "end": "2014-02-28", "max_states": 12},
    )
    cfg |= {"rounds": 2, "weather": {"path": "my weather.csv", "place": "Seattle, WA", "rain_mm": 0.5}}
    cfg["model"]["tiny"]["format_warmup_steps"] = 60  # answers that parse, so that score is exercised
    write_config(tmp_path / "config.yaml", cfg)
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--cores", "2", cwd=tmp_path)
    assert "data: weather file my weather.csv, in mm, C and m/s;" in proc.stderr
    res = tmp_path / "results" / "weather"
    assert sorted(p.name for p in res.glob("*.png")) == ["invalid_answers.png", "learning_curve.png"]
    states = pd.read_parquet(res / "states.parquet")
    assert states.prompt.str.startswith("Weather in Seattle, WA,").all()
    assert states.prompt.str.contains(r"Will it rain tomorrow \(more than 0.5 mm\)\?").all()
    assert json.loads((res / "audit.json").read_text())["states_checked"] == 36
    assert "audit: 36 states clean; calendar days between splits" in proc.stdout + proc.stderr
    assert pd.read_parquet(res / "weather.parquet").date.max() == pd.Timestamp(raw.Date.iloc[799])
    summary = json.loads((res / "metrics.json").read_text())
    assert [r["round"] for r in summary["rounds"]] == [0, 1, 2]
    assert set(summary["baselines"]) == {"climatology", "persistence", "threshold", "never"}
    modes = [r[mode] for r in summary["rounds"] for mode in ("greedy", "sampled")]
    assert not any("sharpe" in m for m in [*modes, *summary["baselines"].values()])  # a forecast holds no capital
    assert all(m["states"] == 6 and m["yes_rate"]["n"] == m["n_valid"] for m in modes)
    assert any(0 <= m["yes_rate"]["mean"] <= 1 for m in modes if m["n_valid"])
    preds = pd.read_parquet(res / "eval" / "round_2" / "predictions.parquet")
    outcomes = pd.read_parquet(res / "outcomes.parquet").set_index("state_id")
    valid = preds[preds.valid]
    assert len(valid) and set(valid.answer) <= {"yes", "no"}
    assert (valid.reward == (valid.answer.eq("yes") == outcomes.rain[valid.state_id].to_numpy())).all()
    assert (preds.rain == outcomes.rain[preds.state_id].to_numpy()).all()
    headline = pd.read_csv(res / "headline.csv")
    assert len(headline) == 6 and "mean reward" in headline.columns  # no dollar sign: not a market


@pytest.mark.slow
def test_a_noaa_export_runs_every_stage_as_delivered_with_its_units_declared(tmp_path):
    """NOAA's daily-summary CSV as it comes (quoted, upper-case codes, inches and Fahrenheit,
    no wind, blank cells, two days absent) through the real DAG with the tiny model."""
    noaa_export(tmp_path / "noaa.csv", days=800)
    cfg = weather_config(
        window=3,
        train={"start": "2012-01-01", "end": "2013-06-30", "max_states": 24},
        test={"start": "2013-09-01", "end": "2014-02-28", "max_states": 12},
    )
    cfg |= {"rounds": 1, "weather": {"path": "noaa.csv", "units": "standard"}}
    write_config(tmp_path / "config.yaml", cfg)
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--cores", "2", cwd=tmp_path)
    res = tmp_path / "results" / "weather"
    log = (res / "logs" / "fetch_prices.log").read_text()
    assert "units: standard" in log and "missing readings on 5 days (2 absent from the file)" in log
    states = pd.read_parquet(res / "states.parquet")
    assert states.prompt.str.contains(" mm, high ").all() and not states.prompt.str.contains("wind").any()
    assert json.loads((res / "metrics.json").read_text())["rounds"][-1]["round"] == 1
    assert "audit: 36 states clean" in proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("push_budget", [None, 1.0], ids=["unscaled", "push_budget"])
def test_the_two_claims_design_runs_through_the_dag(push_budget, tmp_path):
    """configs/weather_claims.yaml's design with the tiny model, one round, every stage: the
    decision by full_information on both answers' prices, the reason by best_answers on the
    grounding reward (the reason bonus among its terms) among reasons sampled after each
    answer (rollout.each_answer); evaluate answers each test state and its changed copy;
    benchmarks/evidence reads the run into its claims table. With push_budget
    (signal_claims'), the reasons pushed down weigh at most what those imitated do."""
    import importlib.machinery
    import importlib.util

    import duckdb
    from safetensors.torch import load_file

    cfg = weather_config()
    cfg["model"]["tiny"]["format_warmup_steps"] = 30
    cfg["train"] = {
        **cfg["train"],
        "objective": "full_information",
        "per_device_batch_size": 4,
        "full_information": {"rationale": "best_answers", "decision_epochs": 1, "push_budget": push_budget},
    }
    cfg["grounding"] = {"unsupported_claim_penalty": 0.1, "reason_bonus": 0.25}
    cfg["rollout"] |= {"each_answer": True, "samples_per_state": 4}
    cfg["evaluate"] |= {"base_samples_per_state": 2 * cfg["evaluate"]["samples_per_state"]}
    write_config(tmp_path / "config.yaml", cfg)
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--cores", "2", cwd=tmp_path)
    res = tmp_path / "results" / "weather"
    # two samples after each answer, the written words leading each and counted as the model's own
    rolled = pd.read_parquet(res / "rollouts" / "round_1.parquet").sort_values(["state_id", "sample_idx"])
    assert rolled.groupby("state_id").sample_idx.apply(tuple).map((0, 1, 2, 3).__eq__).all()
    led = rolled.completion.str.extract(r"^(yes|no) because")[0]
    assert led.groupby(rolled.state_id).apply(tuple).map(("yes", "yes", "no", "no").__eq__).all()
    assert rolled.model_mask.map(lambda m: all(m)).all() and rolled.logprobs.map(lambda x: x[0] == 0.0).all()
    train_log = (res / "logs" / "grpo_train_round_1.log").read_text()
    assert "full_information on 8 groups" in train_log
    # the answer word alone first (decision_epochs), then with the reasons, held where it left it
    assert "full_information: the answer word alone, 1 epoch(s), 2 step(s)" in train_log
    before, after = (load_file(res / "policy" / f"round_{r}" / "model" / "model.safetensors") for r in (0, 1))
    assert any(not (before[k] == after[k]).all() for k in before)
    log = pd.read_csv(res / "policy" / "round_1" / "train_log.csv")
    assert log["full_information/p_best"].notna().any()
    with duckdb.connect(str(res / "buffer" / "round_1.duckdb"), read_only=True) as con:
        scores = con.execute("SELECT * FROM scores").df()
    # the stored reward: the environment's, the penalty per claim, the bonus only for a paid
    # reason, taken away for one against its own answer
    bonus = scores.reward - (scores.environment_reward - 0.1 * scores.unsupported_claims)
    good = scores.reason_consistency.eq(1) & scores.reason_supported.eq(1)
    against = scores.reason_consistency.eq(-1)
    assert (bonus[~good & ~against].abs() < 1e-9).all() and (bonus[good] >= 0).all()
    assert ((bonus[against] + 0.25).abs() < 1e-9).all()
    # the rationale trains every sample whose reason the grounding terms paid or charged,
    # as its log says
    paid, charged = (int(((scores.reward - scores.environment_reward) * sign > 1e-9).sum()) for sign in (1, -1))
    trained = paid + (charged if paid or push_budget is None else 0)  # under a budget, none pushed where none is paid
    assert re.search(rf"the rationale trains {trained} samples? of 8 groups", train_log), train_log
    preds = pd.read_parquet(res / "eval" / "round_1" / "predictions.parquet")
    assert preds.changed_completion.notna().all() and set(preds.follows.dropna()) <= {0.0, 1.0}
    # the base sampled evaluate.base_samples_per_state times a state, the trained round samples_per_state
    for r, n in ((0, 2 * cfg["evaluate"]["samples_per_state"]), (1, cfg["evaluate"]["samples_per_state"])):
        sampled = pd.read_parquet(res / "eval" / f"round_{r}" / "predictions.parquet").query("mode == 'sampled'")
        assert sampled.groupby("state_id").size().eq(n).all()
    summary = json.loads((res / "metrics.json").read_text())
    assert [r["round"] for r in summary["rounds"]] == [0, 1]
    loader = importlib.machinery.SourceFileLoader("evidence", str(ROOT / "benchmarks" / "evidence"))
    evidence = importlib.util.module_from_spec(importlib.util.spec_from_loader("evidence", loader))
    loader.exec_module(evidence)
    table = evidence.claims_table({"tiny": res}).splitlines()
    assert len(table) == 2 + len(evidence.CLAIM_ROWS) + 1
    assert table[-2].startswith("| sampled valid rate - base, low end > -0.02 | ")
    threshold = next(row for row in table if row.startswith("| greedy reward - threshold"))
    paired = summary["reward_minus_baseline"]["greedy"]["threshold"]
    assert paired["n"] == summary["rounds"][-1]["greedy"]["states"] and "n/a" not in threshold
    assert table[-1] in ("| every condition | **yes** |", "| every condition | no |")
    rates = summary["rates_minus_base"]["round_1"]["sampled"]
    assert {"consistent_rate", "follows_rate", "template_rate", "wrong_rain_rate"} <= set(rates)
