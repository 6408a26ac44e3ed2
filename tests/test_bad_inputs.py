"""The bad-input matrix: every case exits non-zero with one line naming the culprit, no
traceback, and nothing written."""

import json
import shutil
import sys

import duckdb
import pandas as pd
import pytest
import yaml

from conftest import ROOT, job_counts, run, stage, tiny_config, write_config


def cfg_case(mutate, message, cmd="fetch_prices"):
    def setup(tmp, base):
        cfg = tiny_config()
        mutate(cfg)
        return cmd, cfg, message

    return setup


def file_case(content, message, tickers=("AAPL", "MSFT"), suffix=".csv"):
    def setup(tmp, base):
        path = tmp / f"prices{suffix}"
        path.write_text(content) if isinstance(content, str) else path.write_bytes(content)
        cfg = tiny_config(market={"data": {"source": "file", "path": str(path), "tickers": list(tickers)}})
        return "fetch_prices", cfg, message

    return setup


GOOD_ROWS = "date,ticker,close\n2016-01-04,AAPL,100\n2016-01-04,MSFT,50\n"

CASES = {
    # config
    "unknown top-level key": cfg_case(lambda c: c.update(rouds=2), "unknown config key rouds"),
    "mistyped nested key": cfg_case(lambda c: c["rollout"].update(temprature=0.7), "rollout.temprature"),
    "wrong type": cfg_case(lambda c: c["rollout"].update(samples_per_state="8"), "rollout.samples_per_state"),
    "train window inverted": cfg_case(
        lambda c: c["states"]["train"].update(start="2018-12-31", end="2016-01-01"), "states.train: start"
    ),
    "test before train": cfg_case(
        lambda c: c["states"]["test"].update(start="2015-01-01", end="2015-06-30"), "states.test.start"
    ),
    "windows overlap": cfg_case(lambda c: c["states"]["test"].update(start="2018-06-01"), "states.test.start"),
    "horizon zero": cfg_case(lambda c: c["states"].update(horizon=0), "states.horizon"),
    "horizon negative": cfg_case(lambda c: c["states"].update(horizon=-3), "states.horizon"),
    "B below 2": cfg_case(lambda c: c["rollout"].update(samples_per_state=1), "rollout.samples_per_state"),
    "eps negative": cfg_case(lambda c: c["rollout"].update(temperature_eps=-0.1), "rollout.temperature_eps"),
    "eps not below temperature": cfg_case(
        lambda c: c["rollout"].update(temperature_eps=0.7), "rollout.temperature_eps"
    ),
    "rounds zero": cfg_case(lambda c: c.update(rounds=0), "config key rounds"),
    "empty ticker list": cfg_case(lambda c: c["market"]["data"].update(tickers=[]), "market.data.tickers"),
    "pairwise with one ticker": cfg_case(lambda c: c["market"]["data"].update(tickers=["AAPL"]), "at least 2 tickers"),
    "not a date": cfg_case(lambda c: c["states"]["train"].update(start="2016-02-30"), "states.train.start"),
    "embargo shorter than horizon": cfg_case(lambda c: c["states"].update(embargo=1), "states.embargo"),
    "unsafe run name": cfg_case(lambda c: c.update(run="a b;rm"), "config key run"),
    "unsafe ticker": cfg_case(
        lambda c: c["market"]["data"].update(tickers=["AAPL", "$(reboot)"]), "market.data.tickers"
    ),
    "unknown ticker": cfg_case(
        lambda c: c["market"]["data"].update(tickers=["AAPL", "NOTATICKER"]), "NOTATICKER not in"
    ),
    "file source without path": cfg_case(lambda c: c["market"]["data"].update(source="file"), "market.data.path"),
    "path without the file source": cfg_case(  # it would train on the bundled sample in silence
        lambda c: c["market"]["data"].update(path="prices.csv"),
        "market.data.path is set, but market.data.source is sample: set market.data.source",
    ),
    "groups split across steps": cfg_case(
        lambda c: c["train"].update(per_device_batch_size=6), "train.per_device_batch_size"
    ),
    "listwise larger than the universe": cfg_case(
        lambda c: c["market"]["states"].update(formats=["listwise"], list_size=5), "market.states.list_size = 5"
    ),
    "validation overlaps test": cfg_case(
        lambda c: c["states"].update(validation={"start": "2019-01-01", "end": "2019-04-01"}), "states.test.start"
    ),
    "evaluate a missing validation split": cfg_case(
        lambda c: c["evaluate"].update(split="validation"), "states.validation is not set"
    ),
    "unknown fault policy": cfg_case(
        lambda c: c["market"]["data"].update(faults={"missing": "guess"}), "market.data.faults.missing"
    ),
    "unknown environment": cfg_case(lambda c: c.update(environment="casino"), "config key environment"),
    # data
    "empty price file": file_case("", "is empty"),
    "missing date column": file_case("day,ticker,close\n2016-01-04,AAPL,1\n", "no 'date' column"),
    "bad dates": file_case("date,ticker,close\nyesterday,AAPL,1\n", "unreadable date"),
    "only one ticker in the file": file_case(
        "date,ticker,close\n2016-01-04,AAPL,100\n", "MSFT not in the file source (it has AAPL)"
    ),
    "semicolon-separated file": file_case(
        "date;AAPL;MSFT\n2016-01-04;1;2\n", "no 'date' column (columns: date;AAPL;MSFT); is it separated by ';'?"
    ),
    "relative path that is not there": cfg_case(
        lambda c: c["market"]["data"].update(source="file", path="nowhere/p.csv"),
        "price file nowhere/p.csv does not exist (relative to the working directory",
    ),
    "index symbol with a regular-expression message": cfg_case(
        lambda c: c["market"]["data"].update(tickers=["AAPL", "GS PC"]), "not a ticker symbol (up to 16 letters"
    ),
    "daily and monthly prices mixed": file_case(
        "date,ticker,close\n"
        + "".join(f"2016-01-{d:02},AAPL,1\n" for d in range(4, 9))
        + "".join(f"2016-{m:02}-28,MSFT,1\n" for m in range(1, 6)),
        "AAPL's prices are daily and MSFT's monthly: a run's tickers need one frequency",
    ),
    "an Excel workbook": file_case(
        b"PK\x03\x04 a zipped workbook", "a spreadsheet is not read; save the sheet as CSV", suffix=".xlsx"
    ),
    "a Latin-1 ticker": file_case(
        "date,ticker,close\n2016-01-04,AAPL,1\n2016-01-04,SOCI\xc9T\xc9,2\n".encode("latin-1"),
        "not UTF-8 text (it holds byte 0xc9); save it as UTF-8",
    ),
    "a Latin-1 date": file_case(
        "date,ticker,close\n2016-01-04,AAPL,1\n4 f\xe9v 2016,MSFT,2\n".encode("latin-1"),
        "not UTF-8 text (it holds byte 0xe9); save it as UTF-8",
    ),
    "prices dated after today": file_case(
        "date,ticker,close\n" + "".join(f"{y}-03-02,{t},1\n" for y in (2016, 2099) for t in ("AAPL", "MSFT")),
        "AAPL is priced on 2099-03-02, after today",
    ),
    "a directory as the price file": cfg_case(
        lambda c: c["market"]["data"].update(source="file", path="/tmp"), "price file /tmp is a directory"
    ),
    "dates with no prices": cfg_case(
        lambda c: c["states"].update(
            train={"start": "1970-01-01", "end": "1979-12-31"}, test={"start": "1980-06-01", "end": "1985-12-31"}
        ),
        "(config keys states.train.start .. states.test.end, padded by the window and horizon); the sample "
        "source has AAPL on 1990-01-02 .. 2022-12-28",
    ),
    "all prices missing": file_case("date,ticker,close\n2016-01-04,AAPL,\n2016-01-04,MSFT,\n", "no prices for"),
    "text in a price cell": file_case(
        GOOD_ROWS + "2016-01-05,AAPL,abc\n", "unreadable close 'abc' for AAPL on 2016-01-05"
    ),
    "non-positive price": file_case(GOOD_ROWS + "2016-01-05,AAPL,0\n", "non-positive close"),
    "duplicate rows that disagree": file_case(
        GOOD_ROWS + "2016-01-04,AAPL,101\n", "duplicate price rows for AAPL on 2016-01-04 disagree"
    ),
    "intraday bars": file_case(
        "date,ticker,close\n2016-01-04 09:30,AAPL,100\n2016-01-04 09:30,MSFT,50\n2016-01-04 10:30,AAPL,101\n",
        "AAPL is priced at 09:30 and at 10:30 on 2016-01-04: intraday bars",
    ),
    "duplicate rows (faults.duplicate error)": file_case(
        GOOD_ROWS + "2016-01-04,AAPL,100\n", "duplicate price row for AAPL on 2016-01-04"
    ),
    "price file missing": cfg_case(
        lambda c: c["market"]["data"].update(source="file", path="/nonexistent/p.csv"),
        "/nonexistent/p.csv does not exist",
    ),
    "corrupt parquet": file_case(b"PAR1 not really", "cannot read", suffix=".parquet"),
    "one ticker's OHLCV file": file_case(  # its columns are not tickers
        "Date,Open,High,Low,Close,Volume\n2016-01-04,1,1,1,1,9\n",
        "holds one ticker's prices (columns Date, Open, High, Low, Close, Volume): name its ticker",
        tickers=("Close", "Volume"),
    ),
    "long table without a price column": file_case(
        "date,symbol,value\n2016-01-04,AAPL,1\n", "a 'symbol' column but no price column"
    ),
    # model
    "model path missing": cfg_case(
        lambda c: c["model"].update(name_or_path="/nonexistent/model"),
        "directory /nonexistent/model does not exist",
        cmd="base_model",
    ),
    "market.data.tickers missing (the tiny model's corpus)": cfg_case(
        lambda c: c["market"]["data"].pop("tickers"), "config key market.data.tickers is required", cmd="base_model"
    ),
    "model.tiny shape": cfg_case(
        lambda c: c["model"]["tiny"].update(hidden_size=30, num_heads=4), "model.tiny.hidden_size", cmd="base_model"
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input(case, tmp_path, base_run):
    cmd, cfg, message = CASES[case](tmp_path, base_run)
    path = write_config(tmp_path / "config.yaml", cfg)
    before = set(tmp_path.rglob("*"))
    proc = stage(cmd, "--config", path, "--out", tmp_path / "out", check=False)
    _assert_one_line_error(proc, message)
    assert set(tmp_path.rglob("*")) == before, "something was written"


def test_tokenizer_without_chat_template(tmp_path, base_run):
    model = tmp_path / "model"
    shutil.copytree(base_run / "policy" / "round_0" / "model", model)
    (model / "chat_template.jinja").unlink()
    cfg = write_config(tmp_path / "config.yaml", tiny_config(model={"name_or_path": str(model)}))
    proc = stage("base_model", "--config", cfg, "--out", tmp_path / "out", check=False)
    _assert_one_line_error(proc, "has no chat template")
    assert not (tmp_path / "out").exists()


def _rollout(flag: str, value: str) -> list[str]:
    """A rollout command line with good placeholders and one flag's value replaced."""
    args = {"--config": "C", "--round": "1", "--states": "S", "--policy": "P", "--out": "O", "--prompts": "Q"}
    return ["rollout", *(x for k, v in {**args, flag: value}.items() for x in (k, v))]


def _score(config: str) -> list[str]:
    """A score command line with the states file (S) for every input."""
    inputs = [x for flag in ("--rollouts", "--states", "--outcomes", "--prompts") for x in (flag, "S")]
    return ["score", "--config", config, "--round", "1", *inputs, "--out", "O"]


def _grpo_train(buffer: str, round_: str = "1") -> list[str]:
    return ["grpo_train", "--config", "C", "--round", round_, "--buffer", buffer, "--policy", "P", "--out", "O"]


def _evaluate(round_: str) -> list[str]:
    """An evaluate command line for the base policy (P) under --round round_."""
    inputs = ["--states", "S", "--outcomes", "S", "--predictions", "O", "--metrics", "O"]
    return ["evaluate", "--config", "C", "--round", round_, "--policy", "P", *inputs]


@pytest.mark.parametrize(
    "args, message",
    [
        (["fetch_prices", "--config", "C"], "the following arguments are required: --out"),
        (_rollout("--round", "x"), "argument --round: invalid int value"),
        (_rollout("--round", "0"), "--round 0: rounds start at 1"),
        (_rollout("--states", "missing.parquet"), "missing.parquet does not exist"),
        (_rollout("--policy", "nopolicy"), "nopolicy: no policy.json"),
        (_score("C"), "lacks column(s) round"),  # the states file given as the rollouts
        (_score("BADRUN"), 'config key run = "no spaces": '),  # found once score has begun writing the buffer
        (_grpo_train("none.duckdb"), "replay buffer none.duckdb does not exist"),
        (_grpo_train("S"), "states.parquet: DuckDB cannot open it"),  # another artifact as the buffer
        (_grpo_train("D"), "replay buffer D lacks table(s) states, outcomes, prompts, rollouts, scores"),
        ([*_score("C"), "--previous", "D"], "previous replay buffer D lacks table(s) states, outcomes"),
        # another round's policy, whose outputs would be named and summarized as the wrong round's
        (_evaluate("1"), "round_0 is round 0's policy; --round 1 evaluates round 1's"),
        (_rollout("--round", "2"), "round_0 is round 0's policy; --round 2 rolls out round 1's"),
        (_grpo_train("D", "2"), "round_0 is round 0's policy; --round 2 trains from round 1's"),
        (["fetch_prices", "--config", "missing.yaml", "--out", "O"], "config file missing.yaml does not exist"),
        (["fetch_prices", "--config", "{not json", "--out", "O"], "--config: not valid JSON"),
        (["fetch_prices", "--config", "LIST", "--out", "O"], "is not a mapping"),
    ],
)
def test_bad_cli_arguments(args, message, tmp_path, base_run, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path / "C", tiny_config())
    (tmp_path / "LIST").write_text(yaml.safe_dump([1, 2]))
    write_config(tmp_path / "BADRUN", tiny_config(run="no spaces"))
    with duckdb.connect(str(tmp_path / "D")) as con:  # a DuckDB file, not a replay buffer
        con.execute("CREATE TABLE prices AS SELECT 1 AS close")
    subs = {"S": base_run / "states.parquet", "P": base_run / "policy" / "round_0", "O": tmp_path / "O"}
    proc = stage(*[subs.get(a, a) for a in args], check=False)
    _assert_one_line_error(proc, message)
    assert not (tmp_path / "O").exists()


def _score_inputs(tmp_path, base_run, lacking: str | None = None) -> list:
    """Two rollouts of the base run's first two states, their states, outcomes and prompt ids
    written to tmp_path (``lacking`` the second state's row), as score's input arguments."""
    states = pd.read_parquet(base_run / "states.parquet").head(2)
    ids = states.state_id.tolist()
    rollouts = {"completion_ids": [[1, 2]] * 2, "logprobs": [[-0.5, -0.5]] * 2, "model_mask": [[1, 1]] * 2}
    inputs = {
        "rollouts": pd.DataFrame(
            {"state_id": ids, "round": 1, "sample_idx": 0, "temperature": 1.0, **rollouts, "completion": "A"}
        ).assign(answers=[["A"]] * 2),
        "states": states,
        "outcomes": pd.read_parquet(base_run / "outcomes.parquet").query("state_id in @ids"),
        "prompts": pd.DataFrame({"state_id": ids, "round": 1, "prompt_ids": [[3, 4]] * 2}),
    }
    if lacking:
        inputs[lacking] = inputs[lacking].query("state_id != @ids[1]")
    for name, frame in inputs.items():
        frame.to_parquet(tmp_path / f"{name}.parquet")
    return [x for name in inputs for x in (f"--{name}", tmp_path / f"{name}.parquet")]


@pytest.mark.parametrize("lacking", [None, "states", "outcomes", "prompts"])
def test_score_names_the_input_that_lacks_a_rollouts_state(lacking, tmp_path, base_run):
    args = _score_inputs(tmp_path, base_run, lacking)
    cfg = write_config(tmp_path / "c.yaml", tiny_config())
    proc = stage("score", "--config", cfg, "--round", "1", *args, "--out", tmp_path / "b.duckdb", check=False)
    if lacking is None:  # the control: these inputs score
        assert proc.returncode == 0, proc.stderr
        return
    ids = pd.read_parquet(tmp_path / "rollouts.parquet").state_id.tolist()
    what = {"states": "no state", "outcomes": "no outcome", "prompts": "no prompt ids"}[lacking]
    _assert_one_line_error(proc, f"state {ids[1]} has {what} in {tmp_path / lacking}.parquet")
    assert not (tmp_path / "b.duckdb").exists()


# a user's environment, registered by a line in ENVIRONMENTS: the market's, with its score's
# frame broken as BREAK says (none: the control)
BROKEN_ENVIRONMENT = """
import os
import pandas as pd
from hitchhiker.environments.market.environment import Market


class Broken(Market):
    def score(self, samples, states, outcomes, reward_cfg):
        scored = super().score(samples, states, outcomes, reward_cfg)
        return {
            "none": lambda: scored,
            "mixed column": lambda: scored.assign(note=[1, "one"]),
            "reward as text": lambda: scored.assign(reward=scored.reward.map("{:.2f}".format)),
            "count missing": lambda: scored.drop(columns="supported_claims"),
            "indexed by state": lambda: scored.set_axis(samples["state_id"]),
            "a sample column": lambda: scored.assign(state_id="x"),
        }[os.environ["BREAK"]]()


ENVIRONMENT = Broken("broken")
"""
RUN_SCORE = """
from hitchhiker import cli, environments
from hitchhiker.stages import score
environments.ENVIRONMENTS["broken"] = "broken_env"
cli.run(score.main)
"""


@pytest.mark.parametrize(
    "broken, message",
    [
        ("none", None),
        ("mixed column", "the broken environment's score: column note does not hold one type ("),
        ("reward as text", "the broken environment's score: column reward is str, not numbers"),
        ("count missing", "the broken environment's score returned no column(s) supported_claims"),
        ("indexed by state", "returned 2 rows not indexed like its 2 samples (index=samples.index)"),
        ("a sample column", "returned the samples' own column(s) state_id again"),
    ],
)
def test_score_names_what_a_custom_environments_score_breaks(broken, message, tmp_path, base_run, monkeypatch):
    """An environment's score is the user's code: a frame that breaks its contract stops
    score in one line naming the column, with no buffer written, not in Arrow's or DuckDB's
    traceback, or as rewards joined to the wrong samples."""
    (tmp_path / "broken_env.py").write_text(BROKEN_ENVIRONMENT)
    (tmp_path / "run_score.py").write_text(RUN_SCORE)
    args = _score_inputs(tmp_path, base_run)
    cfg = write_config(tmp_path / "c.yaml", tiny_config(environment="broken"))
    monkeypatch.setenv("BREAK", broken)
    proc = run(sys.executable, tmp_path / "run_score.py", "--config", cfg, "--round", "1", *args,
               "--out", tmp_path / "b.duckdb", check=False)  # fmt: skip
    if message is None:  # the control: the market's own frame, through the same runner
        assert proc.returncode == 0, proc.stderr
        return
    _assert_one_line_error(proc, message)
    assert not (tmp_path / "b.duckdb").exists()


@pytest.mark.parametrize(
    "predictions, metrics, message",
    [
        (["p0"], ["m0", "m1"], "--predictions hold rounds 0, --metrics rounds 0, 1: give both for the same rounds"),
        (["p0", "p1"], ["m0"], "--predictions hold rounds 0, 1, --metrics rounds 0"),
        (["p0", "p0 copy"], ["m0"], "--predictions: round 0 in both p0 and p0 copy"),  # would count it twice
        (["p0"], ["m0", "m0"], "--metrics: round 0 in both m0 and m0"),
        (["p1"], ["m1"], "needs the base policy's (round 0) metrics"),
        (["p0"], ["p0"], "input file p0 is not readable JSON"),  # the kinds swapped
        (["p0"], ["audit.json"], "input file audit.json lacks key(s) round, greedy, sampled"),
        (["p0 elsewhere"], ["m0"], "has no state elsewhere of the predictions: is it this run's?"),
    ],
)
def test_summarize_takes_each_rounds_predictions_and_metrics_once(
    predictions, metrics, message, tmp_path, base_run, monkeypatch
):
    """Files a hand-run summarize can be given wrongly: refused before anything is written,
    never summarized with a round missing or counted twice."""
    monkeypatch.chdir(tmp_path)
    first = pd.read_parquet(base_run / "states.parquet").iloc[0]
    for r in (0, 1):
        for name, state in ((f"p{r}", first.state_id), (f"p{r} copy", first.state_id),
                            (f"p{r} elsewhere", "elsewhere")):  # fmt: skip
            row = {"round": r, "mode": "greedy", "state_id": state, "date": first.date, "reward": 0.0}
            pd.DataFrame([row]).to_parquet(tmp_path / name)
        (tmp_path / f"m{r}").write_text(json.dumps({"round": r, "greedy": {}, "sampled": {}}))
    (tmp_path / "audit.json").write_text(json.dumps({"train_to_test": {}}))
    out = tmp_path / "out"
    proc = stage(
        "summarize", "--config", write_config(tmp_path / "c.yaml", tiny_config()),
        "--states", base_run / "states.parquet", "--outcomes", base_run / "outcomes.parquet",
        "--predictions", *predictions, "--metrics", *metrics, "--out-json", out / "metrics.json",
        "--out-plot", out / "curve.png", "--out-env-plots", out / "equity_curves.png", out / "calibration.png",
        "--out-invalid", out / "invalid.png", "--out-headline", out / "headline.csv", check=False,
    )  # fmt: skip
    _assert_one_line_error(proc, message)
    assert not out.exists()


def _assert_one_line_error(proc, message):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hitchhiker: error:"), proc.stderr
    assert message in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


def test_the_vllm_backend_without_vllm_is_refused_before_any_job_unless_conda_brings_it(monkeypatch):
    from hitchhiker import preflight
    from hitchhiker.cli import HitchhikerError

    monkeypatch.setattr(preflight.importlib.util, "find_spec", lambda name: None)  # as on a machine without it
    cfg = {"model": {"name_or_path": "tiny"}, "rollout": {"backend": "vllm"}, "train": {"accelerate_config": None}}
    with pytest.raises(HitchhikerError, match=r"config key rollout\.backend = vllm, but vLLM is not installed"):
        preflight.run(cfg, conda=False)
    preflight.run(cfg, conda=True)  # each rule's conda environment brings its own


def test_a_split_that_runs_past_the_data_is_said_to_be_cut(tmp_path, base_run):
    st = tiny_config()["states"]
    cfg = write_config(tmp_path / "c.yaml", tiny_config(states={**st, "test": {**st["test"], "end": "2030-12-31"}}))
    proc = stage("build_states", "--config", cfg, "--data", base_run / "prices.parquet", "--policy",
                 base_run / "policy" / "round_0", "--states", tmp_path / "s.parquet",
                 "--outcomes", tmp_path / "o.parquet")  # fmt: skip
    last = pd.read_parquet(tmp_path / "s.parquet").query("split == 'test'").date.max().date()
    end = pd.read_parquet(base_run / "prices.parquet").date.max().date()
    assert f"states.test.end = 2030-12-31 is after the data's last date {end}" in proc.stdout
    assert f"the split's last decision date is {last}" in proc.stdout
    assert "states.train" not in proc.stdout.split("->")[-1]  # the split inside the data: no line


def test_a_split_cut_to_the_data_is_said_on_the_console(tmp_path):
    """The run's console, not only logs/build_states.log, says that a split was cut."""
    st = tiny_config()["states"]
    write_config(tmp_path / "config.yaml", tiny_config(states={**st, "test": {**st["test"], "end": "2030-12-31"}}))
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--cores", "2", "results/tiny/states.parquet", cwd=tmp_path)
    assert "states.test.end = 2030-12-31 is after the data's last date" in proc.stdout + proc.stderr


def test_a_capped_states_per_round_is_said_on_the_console_and_a_dry_run_lists_the_jobs(tmp_path):
    """rollout.states_per_round above the train states draws them all: the console says so."""
    cfg = tiny_config()
    write_config(tmp_path / "config.yaml", {**cfg, "rollout": {**cfg["rollout"], "states_per_round": 100000}})
    target = "results/tiny/rollouts/round_1.parquet"
    dry = run("snakemake", "-s", ROOT / "Snakefile", "--cores", "2", "-n", target, cwd=tmp_path)
    jobs = {"fetch_prices": 1, "base_model": 1, "build_states": 1, "audit": 1, "rollout": 1}
    assert job_counts(dry.stdout + dry.stderr) == jobs, dry.stdout + dry.stderr
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--cores", "2", target, cwd=tmp_path)
    train = (pd.read_parquet(tmp_path / "results/tiny/states.parquet").split == "train").sum()
    said = f"rollout round 1: rollout.states_per_round 100000 is more than the run's {train} train states"
    assert f"{said}: the round draws all {train}" in proc.stderr.splitlines(), proc.stderr
