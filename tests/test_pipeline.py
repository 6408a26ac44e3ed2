"""End to end: the real Snakemake DAG on a tiny config, every artifact checked by content."""

import json
import os
import re
import shutil

import duckdb
import numpy as np
import pandas as pd
import pytest
from transformers import AutoTokenizer

from conftest import ROOT, job_counts, run, stage, tiny_config, write_config
from hitchhiker import policy, rationales
from hitchhiker.environments import get
from hitchhiker.environments.market import answers, hallucination, prompts
from hitchhiker.metrics import portfolio_returns, sharpe

pytestmark = pytest.mark.slow  # the real Snakemake DAG, every stage

CFG = tiny_config(rounds=2)
SNAKEFILE = ROOT / "Snakefile"  # the module's copy of it, once the checkout fixture has made one


@pytest.fixture(scope="module", autouse=True)
def checkout(tmp_path_factory):
    """A copy of the checkout's workflow that this module's runs use, so that the code-change
    test edits the copy, never the files that other workers' runs are reading."""
    global SNAKEFILE
    d = tmp_path_factory.mktemp("checkout")
    for name in ("Snakefile", "config.yaml"):
        shutil.copy2(ROOT / name, d / name)
    for name in ("workflow", "profiles", "envs"):
        shutil.copytree(ROOT / name, d / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (d / "data").symlink_to(ROOT / "data")
    SNAKEFILE = d / "Snakefile"
    yield d
    SNAKEFILE = ROOT / "Snakefile"


def snakemake(workdir, *args, check=True):
    return run(
        "snakemake",
        "-s",
        SNAKEFILE,
        "--configfile",
        workdir / "config.yaml",
        "--cores",
        "2",
        *args,
        cwd=workdir,
        check=check,
    )


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    d = tmp_path_factory.mktemp("pipeline")
    write_config(d / "config.yaml", CFG)
    proc = snakemake(d)
    (d / "console.txt").write_text(proc.stdout + proc.stderr)  # Snakemake and the hooks write to stderr
    return d, d / "results" / "tiny"


def test_the_torch_stages_say_the_threads_snakemake_gave_them(pipeline):
    # Snakemake exports OMP_NUM_THREADS=1, and 2 to base_model and the last round's evaluate,
    # which run alone (workflow/rules/common.smk, Threads); a round's rollout and grpo_train
    # take the run's 2 once the previous round's evaluate beside them is done, and say so
    _, res = pipeline
    for log, threads in [("base_model", 2), ("evaluate_round_1", 1), ("evaluate_round_2", 2)]:
        last = (res / "logs" / f"{log}.log").read_text().splitlines()[-1]
        assert last.endswith(f", {threads} CPU thread(s)"), last
    for log in ("rollout_round_1", "grpo_train_round_1", "rollout_round_2", "grpo_train_round_2"):
        text = (res / "logs" / f"{log}.log").read_text()
        took = "the job beside it is done: 2 CPU threads after" in text
        assert text.splitlines()[-1].endswith(f", {2 if took else 1} CPU thread(s)"), log


def test_a_job_beside_the_previous_evaluate_takes_the_runs_cores_once_it_is_done(tmp_path, monkeypatch):
    import torch

    from hitchhiker import cli

    threads = torch.get_num_threads()
    done = tmp_path / "eval" / "round_1" / "metrics.json"
    monkeypatch.setenv("HITCHHIKER_CORES_AFTER", str(done))
    monkeypatch.setenv("HITCHHIKER_RUN_CORES", "2")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    set_threads = torch.set_num_threads
    try:
        set_threads(1)
        # as vLLM's CPU worker leaves it once its engine has started in this process
        monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
        progress = cli.Progress(8, "steps")
        progress.update(3)
        assert torch.get_num_threads() == 1  # still running beside it
        done.parent.mkdir(parents=True)
        done.write_text("{}")
        progress.update(4)
        assert torch.get_num_threads() == min(2, len(os.sched_getaffinity(0)))
        monkeypatch.setenv("HITCHHIKER_RUN_CORES", "1")  # a run given one core keeps one
        set_threads(1)
        cli.Progress(8, "steps").update(1)
        assert torch.get_num_threads() == 1
    finally:
        set_threads(threads)


def test_no_stage_log_warns_of_a_gpu_it_could_not_find(pipeline):
    # DeepSpeed, where installed, warned in base_model's log ("Setting accelerator to CPU. If
    # you have GPU or other accelerator, we were unable to detect it.") on every CPU run
    _, res = pipeline
    logs = sorted((res / "logs").glob("*.log"))
    assert len(logs) > 10
    for log in logs:
        assert "unable to detect it" not in log.read_text(), log.name


def test_the_console_is_quiet_and_ends_on_the_headline_table(pipeline):
    d, res = pipeline
    lines = (d / "console.txt").read_text().splitlines()
    assert len(lines) < 90, "\n".join(lines)  # two rounds; every job's config and sources once filled hundreds
    assert not any("coroutine" in line or "python -m hitchhiker" in line for line in lines)
    # the jobs by name, as each starts and ends, with its time; not Snakemake's scheduler chatter
    jobs = ["base_model", "fetch_prices", "build_states", "audit", "summarize"]
    jobs += [f"{stage} round {r}" for r in (1, 2) for stage in ("rollout", "score", "grpo_train")]
    jobs += [f"evaluate round {r}" for r in (0, 1, 2)]
    for job in jobs:
        assert f"hitchhiker: {job} ..." in lines and any(re.fullmatch(f"hitchhiker: {job} done in \\d+ s", line)
                                                         for line in lines), job  # fmt: skip
    assert not any(line.startswith(("Select jobs", "Execute ", "Finished jobid", "launch")) for line in lines)
    # the long stages say once, halfway, how far they are and how long it took
    for job in ("grpo_train round 1", "evaluate round 2"):  # (the tiny run's rollouts are one batch)
        assert any(re.fullmatch(f"hitchhiker: {job}: \\d+ of \\d+ (batches|steps) in \\d+ s", x) for x in lines), job
    assert lines[lines.index("Job stats:") + 3].split()[0] in [*jobs, "all"]  # the table of the jobs to run
    assert any(line.startswith("audit: 72 states clean") for line in lines)  # a stage's own summary line
    table = pd.read_csv(res / "headline.csv", dtype=str, keep_default_na=False)
    assert list(table.columns[:3]) == ["round", "mode", "valid"] and len(table) == 6  # 3 rounds x 2 modes
    minus_base = table["reward - base $"]
    assert minus_base.iloc[:2].eq("").all() and minus_base.iloc[2:].str.contains(r"\[").all()
    shown = table.to_string(index=False).splitlines()
    start = lines.index("hitchhiker: results/tiny/headline.csv, held-out test states") + 1
    assert lines[start : start + len(shown)] == shown
    after = lines[start + len(shown) :]  # only Snakemake's own last words follow
    assert all(line.startswith(("Complete log", "Elapsed time")) for line in after), after


def test_a_failed_job_ends_the_console_on_its_one_line_error(pipeline, tmp_path):
    d, _ = pipeline
    shutil.copytree(d, tmp_path / "run", symlinks=True)
    spec = tmp_path / "run" / "results" / "tiny" / "policy" / "round_0" / "policy.json"
    spec.write_text("{not json")
    proc = snakemake(tmp_path / "run", "--forcerun", "evaluate", check=False)
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    said = [line for line in lines if "(log: results/tiny/logs/evaluate_round_0.log)" in line]
    spec = "results/tiny/policy/round_0/policy.json"
    assert len(said) == 1 and said[0].startswith(f"hitchhiker: error: {spec} is not readable JSON"), proc.stderr
    # the job named in one line where Snakemake printed its whole command (every config as JSON)
    assert "hitchhiker: evaluate round 0 failed (exit status 2)" in lines
    assert not any("RuleException" in line or "python -m hitchhiker" in line for line in lines), proc.stderr


def test_prices_are_the_configured_universe(pipeline):
    _, res = pipeline
    prices = pd.read_parquet(res / "prices.parquet")
    assert list(prices.columns) == ["date", "ticker", "close"]
    assert set(prices.ticker) == set(CFG["market"]["data"]["tickers"])
    assert (prices.close > 0).all() and not prices.duplicated(["date", "ticker"]).any()
    assert prices.date.is_monotonic_increasing


def test_states_and_outcomes(pipeline):
    _, res = pipeline
    states, outcomes = pd.read_parquet(res / "states.parquet"), pd.read_parquet(res / "outcomes.parquet")
    assert states.state_id.is_unique and set(states.state_id) == set(outcomes.state_id)
    counts = states.groupby(["split", "format"]).size()
    assert counts[("train", "pairwise")] == 24 and counts[("test", "elementwise")] == 12
    assert states[states.split == "train"].date.max() < states[states.split == "test"].date.min()
    assert (states.date >= "2016-01-01").all() and (states.date <= "2019-12-31").all()
    assert "forward_returns" not in states.columns and "outcome_date" not in states.columns
    tok = AutoTokenizer.from_pretrained(res / "policy" / "round_0" / "model")
    for row in states.itertuples():
        assert all(t in row.prompt for t in row.tickers)
        assert len(tok(policy.chat(tok, row.prompt), add_special_tokens=False).input_ids) <= 384


def test_rollouts_record_groups_temperatures_and_logprobs(pipeline):
    _, res = pipeline
    for r in (1, 2):
        ro = pd.read_parquet(res / "rollouts" / f"round_{r}.parquet")
        assert (ro["round"] == r).all()
        assert all(sorted(g) == [0, 1, 2, 3] for _, g in ro.groupby("state_id").sample_idx)
        assert ro.state_id.nunique() == CFG["rollout"]["states_per_round"]
        assert ro.temperature.between(0.6, 0.8).all() and ro.groupby("state_id").temperature.nunique().eq(1).all()
        assert (ro.completion_ids.map(len) == ro.logprobs.map(len)).all()
        assert all((np.asarray(lp) <= 0).all() for lp in ro.logprobs)
        assert ro.policy.str.endswith(f"policy/round_{r - 1}/model").all()
        prompts = pd.read_parquet(res / "rollouts" / f"round_{r}.prompts.parquet")
        assert set(prompts.state_id) == set(ro.state_id) and prompts.state_id.is_unique  # once per state
        assert "prompt_ids" not in ro.columns and (prompts.prompt_ids.map(len) > 0).all()


REWARD = {"invalid_penalty": -0.05, "cost_bps": 0, "benchmark": "none", "returns": "simple"}


def test_replay_buffer_accumulates_rounds_with_consistent_rewards(pipeline):
    _, res = pipeline
    with duckdb.connect(str(res / "buffer" / "round_2.duckdb"), read_only=True) as con:
        rounds = con.execute("SELECT round, count(*) FROM scores GROUP BY round ORDER BY round").fetchall()
        assert rounds == [(1, 32), (2, 32)]
        dup = con.execute(
            "SELECT count(*) FROM (SELECT run, round, state_id, sample_idx FROM scores "
            "GROUP BY ALL HAVING count(*) > 1)"
        ).fetchone()[0]
        assert dup == 0
        stored = con.execute("SELECT state_id FROM states UNION ALL SELECT state_id FROM outcomes").fetchall()
        drawn = con.execute("SELECT DISTINCT state_id FROM rollouts").fetchall()
        assert sorted(stored) == sorted(drawn * 2)  # the states drawn from, each once, no more
        rows = con.execute("""SELECT r.completion, s.format, o.forward_returns, c.valid, c.reward
                              FROM scores c JOIN rollouts r USING (run, round, state_id, sample_idx)
                              JOIN states s USING (run, state_id) JOIN outcomes o USING (run, state_id)""").fetchall()
    assert len(rows) == 64
    for completion, fmt, fwd, valid, reward in rows:
        action = answers.parse(completion, fmt, len(fwd))
        assert action.valid == valid
        assert reward == pytest.approx(answers.reward(action, fwd, REWARD))


def test_the_grounding_reward_charges_each_unsupported_claim_and_pays_a_supported_reason_not_a_recital(
    pipeline, tmp_path
):
    _, res = pipeline
    rollouts = pd.read_parquet(res / "rollouts" / "round_1.parquet")
    states = pd.read_parquet(res / "states.parquet").set_index("state_id")
    recited = next(iter(prompts.shown(states.prompt[rollouts.state_id[4]])["returns"].values()))[:2]
    # a pairwise state's reason that argues for the pick from what its prompt shows
    pair = next(i for i in range(5, len(rollouts)) if states.format[rollouts.state_id[i]] == "pairwise")
    a, b = (np.prod(1 + r / 100) for r in prompts.shown(states.prompt[rollouts.state_id[pair]])["returns"].values())
    argued = "A, because A rose more than B" if a > b else "B, because B rose more than A"
    rollouts.loc[:4, "completion"] = [
        "A, up 7% while TSLA fell",  # a percent the prompt does not support and an unknown ticker: 2
        "B: +9.99 +8.88 = +1.00",  # two unshown figures and a wrong sum: 3
        "A",
        "B (ZZZ) on Monday",  # an unknown ticker and a weekday: 2
        "A: " + " ".join(f"{v:+.2f}" for v in recited) + " so",  # two figures its prompt shows: no reason
    ]
    rollouts.loc[pair, "completion"] = argued
    # the same argument after the other answer: against its own answer
    twin = next(i for i in range(5, len(rollouts)) if i != pair and rollouts.state_id[i] == rollouts.state_id[pair])
    rollouts.loc[twin, "completion"] = "B" + argued[1:] if argued[0] == "A" else "A" + argued[1:]
    rollouts.to_parquet(tmp_path / "round_1.parquet")
    cfg = {**CFG, "grounding": {"unsupported_claim_penalty": 0.01, "reason_bonus": 0.1}}
    out = tmp_path / "buffer.duckdb"
    stage(
        "score", "--config", write_config(tmp_path / "c.yaml", cfg), "--round", "1",
        "--rollouts", tmp_path / "round_1.parquet", "--states", res / "states.parquet",
        "--outcomes", res / "outcomes.parquet", "--prompts", res / "rollouts" / "round_1.prompts.parquet", "--out", out,
    )  # fmt: skip
    with duckdb.connect(str(out), read_only=True) as con:
        got = con.execute(
            """SELECT r.completion, s.prompt, s.tickers, c.environment_reward, c.unsupported_claims, c.supported_claims,
                      c.valid, c.reward, c.reason_consistency, c.reason_supported
               FROM scores c JOIN rollouts r USING (run, round, state_id, sample_idx)
               JOIN states s USING (run, state_id)
               ORDER BY c.state_id, c.sample_idx"""
        ).df()
    by_text = got.set_index("completion")
    assert by_text.loc["A, up 7% while TSLA fell", "unsupported_claims"] == 2
    assert by_text.loc["B: +9.99 +8.88 = +1.00", "unsupported_claims"] == 3
    assert by_text.loc["B (ZZZ) on Monday", "unsupported_claims"] == 2
    for row in got.itertuples():
        assert row.unsupported_claims == hallucination.count(row.completion, row.prompt, row.tickers)
    recital = by_text.loc[rollouts.completion[4]]
    assert (recital.unsupported_claims, recital.supported_claims, recital.valid) == (0, 2, True)
    assert recital.reason_consistency == 0  # figures, no argument: paid nothing
    assert recital.reward == pytest.approx(recital.environment_reward)
    reason = by_text.loc[argued]
    assert (reason.reason_consistency, reason.reason_supported, reason.unsupported_claims) == (1, 1, 0)
    # paid the bonus times 1 - share/0.1, share being that of the round's answers giving the same
    # reason (itself and its twin: 2 of 64)
    assert reason.reward == pytest.approx(reason.environment_reward + 0.1 * (1 - 2 / len(got) / 0.1))
    # the bonus goes exactly to the consistent, supported reasons (SmolLM2's own among them)
    # and is taken from a reason against its own answer (the twin's among them)
    assert by_text.loc["B" + argued[1:] if argued[0] == "A" else "A" + argued[1:], "reason_consistency"] == -1
    bonus = got.reward - (got.environment_reward - 0.01 * got.unsupported_claims)
    good, against = got.reason_consistency.eq(1) & got.reason_supported.eq(1), got.reason_consistency.eq(-1)
    assert (bonus[good] > 0).all() and bonus[~good & ~against].abs().max() < 1e-9
    assert ((bonus[against] + 0.1).abs() < 1e-9).all()


def test_policies_and_evaluation(pipeline):
    _, res = pipeline
    for r in (0, 1, 2):
        spec = json.loads((res / "policy" / f"round_{r}" / "policy.json").read_text())
        lora = {"adapter": "adapter", "base": f"../round_{r - 1}"} if r else {}  # the tiny config trains LoRA
        assert spec == {"model": "model", "round": r, **lora}
        metrics = json.loads((res / "eval" / f"round_{r}" / "metrics.json").read_text())
        for mode, n in (("greedy", 6), ("sampled", 12)):
            m = metrics[mode]
            assert m["n"] == n and m["states"] == 6
            lo, hi = m["mean_reward"]["ci95"]
            assert lo <= m["mean_reward"]["mean"] <= hi
            assert 0 <= m["valid_rate"]["mean"] <= 1
    preds = [pd.read_parquet(res / "eval" / f"round_{r}" / "predictions.parquet") for r in (0, 1, 2)]
    assert all(set(p.state_id) == set(preds[0].state_id) for p in preds)  # identical test states
    states = pd.read_parquet(res / "states.parquet").set_index("state_id")
    assert (states.loc[preds[0].state_id, "split"] == "test").all()
    summary = json.loads((res / "metrics.json").read_text())
    assert [m["round"] for m in summary["rounds"]] == [0, 1, 2]
    assert set(summary["reward_minus_base"]) == {"round_1", "round_2"}
    assert (res / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    for name in ("equity_curves", "calibration", "invalid_answers"):  # the first two: the market's own plots
        assert (res / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    names = {"random", "always_first", "equal_weight", "momentum", "mean_reversion"}
    assert set(summary["baselines"]) == names
    for stats in summary["baselines"].values():
        lo, hi = stats["mean_reward"]["ci95"]
        assert stats["n"] == 6 and lo <= stats["mean_reward"]["mean"] <= hi
        assert stats["max_drawdown"]["mean"] >= 0
    assert summary["reward_minus_baseline"]["round"] == 2
    assert set(summary["reward_minus_baseline"]["greedy"]) == names
    # paired state by state: accuracy over the states where both the round and the base decided
    p0, p2 = (p.query("mode == 'greedy'").set_index("state_id").correct for p in (preds[0], preds[2]))
    paired = summary["rates_minus_base"]["round_2"]["greedy"]
    both = p0.notna() & p2.loc[p0.index].notna()
    assert paired["accuracy"]["n"] == both.sum() and paired["valid_rate"]["n"] == 6
    # rank IC pairs a state's IC (pairwise) or a date's (elementwise): at most 6 states' worth of units
    assert {"valid_rate", "accuracy", "rank_ic", "any_rate"} <= set(paired) and paired["rank_ic"]["n"] <= 6
    if both.any():
        assert paired["accuracy"]["mean"] == pytest.approx((p2.loc[p0.index][both] - p0[both]).mean())
    # the reason measures, each policy's against its own most common reason (rationales.py)
    assert {"template_rate", "no_reason_rate"} <= set(paired)
    for m in summary["rounds"]:
        sampled = preds[m["round"]].query("mode == 'sampled'")
        reasons = m["sampled"]["reasons"]
        assert {k: reasons[k] for k in ("distinct_reasons", "template")} == rationales.summary(sampled.completion)
        assert reasons["template_rate"]["mean"] == pytest.approx(rationales.indicators(sampled)["template_rate"].mean())
        # the market's pairwise states are also asked with A and B swapped: whether the pick follows
        assert set(sampled.follows.dropna()) <= {0.0, 1.0} and sampled.changed_completion.notna().any()
        for key in (
            "consistent_rate",
            "inconsistent_rate",
            "no_argument_rate",
            "supported_reason_rate",
            "follows_rate",
        ):
            assert key in reasons, key
    assert {"consistent_rate", "follows_rate"} <= set(paired)


def test_the_report_bundles_the_plots_and_the_headline_with_their_captions(pipeline, tmp_path):
    """`snakemake --report report.html`, as "Reading the results" says, on the finished run."""
    d, _ = pipeline
    snakemake(d, "--report", tmp_path / "report.html")
    words = " ".join((tmp_path / "report.html").read_text().replace("\\n", " ").split())  # captions JSON-escaped
    for item in ("learning_curve.png", "headline.csv", "invalid_answers.png", "equity_curves.png", "calibration.png"):
        caption = (ROOT / "workflow" / "report" / f"{item.split('.')[0]}.rst").read_text()
        assert item in words and " ".join(caption.split()[:8]) in words, item
    # an environment's figure with no caption written yet (a new environment's): shown without one
    caption = SNAKEFILE.parent / "workflow" / "report" / "calibration.rst"
    caption.rename(tmp_path / "calibration.rst")
    try:
        snakemake(d, "--report", tmp_path / "uncaptioned.html")
    finally:
        (tmp_path / "calibration.rst").rename(caption)
    assert "calibration.png" in (tmp_path / "uncaptioned.html").read_text()


def test_nothing_left_to_do_and_a_rollout_change_reruns_only_what_follows(pipeline):
    d, _ = pipeline
    assert "Nothing to be done" in snakemake(d, "-n").stdout
    changed = tiny_config(rounds=2)
    changed["rollout"]["temperature"] = 0.8
    write_config(d / "config.yaml", changed)
    try:
        out = snakemake(d, "-n", "--quiet", "rules").stdout
    finally:
        write_config(d / "config.yaml", CFG)
    rules = set(job_counts(out))
    assert {"rollout", "score", "grpo_train", "evaluate", "summarize"} <= rules
    assert not rules & {"fetch_prices", "base_model", "build_states"}


def test_a_grounding_change_reruns_score_onward_and_not_the_first_rollout(pipeline):
    # only score and grpo_train read the grounding section: round 1's rollout and the base policy's
    # evaluation stand; round 2's rollout samples from a policy trained on the new scores
    d, _ = pipeline
    changed = tiny_config(rounds=2, grounding={"unsupported_claim_penalty": 0.01})
    write_config(d / "config.yaml", changed)
    try:
        out = snakemake(d, "-n", "--quiet", "rules").stdout
    finally:
        write_config(d / "config.yaml", CFG)
    assert job_counts(out) == {"score": 2, "grpo_train": 2, "rollout": 1, "evaluate": 2, "summarize": 1, "all": 1}


STAGES = {
    *("fetch_prices", "base_model", "build_states", "audit"),
    *("rollout", "score", "grpo_train", "evaluate", "summarize"),
}


@pytest.mark.parametrize(
    "module, rerun",
    [
        # round 2's rollout uses the policy trained on round 1's scores, so it follows score
        ("stages/score", {"score", "grpo_train", "rollout", "evaluate", "summarize"}),
        ("stages/evaluate", {"evaluate", "summarize"}),
        # every stage validates its config through the environment's check_config
        ("environments/market/environment", STAGES),
        # imported by the methods score, evaluate and summarize call (sources.CALLED_BY): score onward
        ("environments/market/hallucination", {"score", "grpo_train", "rollout", "evaluate", "summarize"}),
        ("environments/market/sequential", set()),  # another environment's module: only the configured one is an input
        ("environments/weather", set()),
        ("policy", STAGES - {"fetch_prices"}),  # base_model, build_states, rollout, evaluate import it
        # the configured objective's module: grpo_train onward (round 2 samples and is scored anew);
        # another objective's: nothing
        ("training/objectives/grpo", {"grpo_train", "rollout", "score", "evaluate", "summarize"}),
        ("training/objectives/dpo", set()),
    ],
)
def test_a_code_change_reruns_that_stage_and_what_follows(pipeline, module, rerun):
    d, _ = pipeline
    src = SNAKEFILE.parent / "workflow" / "hitchhiker" / f"{module}.py"  # the module's copy
    original = src.read_bytes()
    stat = src.stat()
    # an edit, not a touch: Snakemake skips inputs whose content it has seen before
    src.write_bytes(original + b"# edited\n")
    try:
        out = snakemake(d, "-n", "--quiet", "rules").stdout
    finally:
        src.write_bytes(original)
        os.utime(src, (stat.st_atime, stat.st_mtime))
    assert set(job_counts(out)) - {"all"} == rerun


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c["rollout"].update(temprature=0.7), "unknown config key rollout.temprature"),
        (lambda c: c["market"]["data"].update(tickers=["AAPL", "ZZZZ"]), "ZZZZ not in the sample source"),
        (lambda c: c["states"]["test"].update(start="2014-01-01", end="2014-12-31"), "states.test.start"),
        (  # after the sample ends: found by reading the prices, still before any job
            lambda c: c["states"]["test"].update(start="2023-06-01", end="2023-12-31"),
            "states.test: no decision date in 2023-06-01 .. 2023-12-31 with 5 trading days of history",
        ),
        (  # found by build_states, four jobs in, before
            lambda c: c["market"]["states"].update(features=["returns", "volume"]),
            "market.states.features includes volume, but the sample prices have none",
        ),
        (  # base_model's traceback, 75 lines down, before
            lambda c: c["model"].update(name_or_path="./no/such/model"),
            "model.name_or_path: directory ./no/such/model does not exist",
        ),
        (  # Snakemake's "Missing input files" for the build_states job, before
            lambda c: (
                c["market"]["data"].update(signals="ratings.csv"),
                c["market"]["states"].update(signals=["rating"]),
            ),
            "config key market.data.signals: ratings.csv does not exist (relative to the working directory",
        ),
    ],
)
def test_bad_config_stops_before_any_work(tmp_path, mutate, message):
    cfg = tiny_config()
    mutate(cfg)
    write_config(tmp_path / "config.yaml", cfg)
    proc = snakemake(tmp_path, check=False)
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and message in errors[0], proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "results").exists()


def test_same_config_and_seed_give_identical_artifacts(pipeline, tmp_path):
    _, res = pipeline
    write_config(tmp_path / "config.yaml", CFG)
    snakemake(tmp_path)
    again = tmp_path / "results" / "tiny"
    for name in ("prices.parquet", "states.parquet", "outcomes.parquet", "metrics.json", "audit.json"):
        assert (res / name).read_bytes() == (again / name).read_bytes(), name
    for r in (1, 2):
        rel = f"policy/round_{r}/model/model.safetensors"
        assert (res / rel).read_bytes() == (again / rel).read_bytes(), rel
        # the same tokens; the logprobs within float32's last bits: a rollout that takes the
        # run's cores once the evaluation beside it is done (cli.Progress) computes on two
        # threads from that batch on, and when it does differs run to run (CI, 2026-12-07: one
        # of 186 logprobs 4.8e-7 apart, the rerun on two threads, the first on one)
        first, second = (pd.read_parquet(d / f"rollouts/round_{r}.parquet") for d in (res, again))
        pd.testing.assert_frame_equal(first.drop(columns="logprobs"), second.drop(columns="logprobs"))
        np.testing.assert_allclose(
            np.concatenate(first.logprobs.tolist()), np.concatenate(second.logprobs.tolist()), rtol=0, atol=1e-5
        )
    for r in (0, 1, 2):
        rel = f"eval/round_{r}/predictions.parquet"
        pd.testing.assert_frame_equal(pd.read_parquet(res / rel), pd.read_parquet(again / rel))
    for table in ("states", "outcomes", "rollouts", "scores"):
        frames = []
        for root in (res, again):
            with duckdb.connect(str(root / "buffer" / "round_2.duckdb"), read_only=True) as con:
                frames.append(con.execute(f"SELECT * FROM {table} ORDER BY ALL").df())
        pd.testing.assert_frame_equal(*frames)


def _strict_json(path):
    """JSON as JavaScript's JSON.parse reads it: NaN and Infinity are not JSON."""

    def refuse(constant):
        raise ValueError(f"{path}: {constant} is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_listwise_runs_every_stage_and_writes_strict_json(tmp_path):
    cfg = tiny_config(
        run="listwise",
        market={
            "data": {"tickers": ["AAPL", "MSFT", "KO", "JPM", "XOM"]},
            "states": {"formats": ["listwise"], "list_size": 4},
        },
    )
    cfg["model"]["dtype"] = "fast"  # the default run's: each stage that loads the model says what it resolved to
    write_config(tmp_path / "config.yaml", cfg)
    snakemake(tmp_path)
    res = tmp_path / "results" / "listwise"
    resolved = f"model.dtype fast: {policy.dtype(cfg['model'])} ("
    for stage_log in ("rollout_round_1", "grpo_train_round_1", "evaluate_round_0", "evaluate_round_1"):
        assert resolved in (res / "logs" / f"{stage_log}.log").read_text(), stage_log
    summary = _strict_json(res / "metrics.json")
    assert [r["round"] for r in summary["rounds"]] == [0, 1]
    preds = pd.read_parquet(res / "eval" / "round_1" / "predictions.parquet")
    assert (preds.format == "listwise").all() and (preds.tickers.map(len) == 4).all()
    for r in (0, 1):
        _strict_json(res / "eval" / f"round_{r}" / "metrics.json")


def test_signals_and_news_run_every_stage_shown_as_of_each_decision_date_audited_and_a_baseline_each(tmp_path):
    """A researcher's own files, relative to the working directory: a wide file of a monthly
    analyst rating per ticker, dated the first of each month (often a weekend), and headlines
    every third business day, stamped at New York's midnight as yfinance writes dates."""
    months = pd.date_range("2015-12-01", "2020-01-01", freq="MS")
    rng = np.random.default_rng(0)
    table = pd.DataFrame([(m, t) for m in months for t in ("AAPL", "MSFT", "KO")], columns=["Date", "Ticker"])
    table["analyst rating"] = rng.integers(1, 6, len(table)).astype(float)
    table["eps revision"] = rng.normal(0, 0.01, len(table)).round(4)
    table["unused"] = "text"  # a text column is no signal: market.states.signals, not given, is the numeric ones
    table.to_csv(tmp_path / "ratings.csv", index=False)
    days = pd.bdate_range("2015-12-01", "2020-01-01")[::3]
    news = pd.DataFrame([(f"{d:%Y-%m-%d} 00:00:00-05:00", t, f"{t} news of {d:%Y-%m-%d}") for d in days
                         for t in ("AAPL", "MSFT", "KO")], columns=["date", "ticker", "headline"])  # fmt: skip
    news.to_csv(tmp_path / "news.csv", index=False)
    cfg = tiny_config(run="signals")
    cfg["market"]["data"]["signals"] = "ratings.csv"
    cfg["market"]["data"]["news"] = "news.csv"
    write_config(tmp_path / "config.yaml", cfg)
    snakemake(tmp_path)
    res = tmp_path / "results" / "signals"
    states = pd.read_parquet(res / "states.parquet")
    latest = table.set_index(["Ticker", "Date"])["analyst rating"]
    for row, column in zip(states.itertuples(), states["signal_analyst rating"], strict=True):
        assert "Signals as of today's close:" in row.prompt
        month = row.date.to_period("M").to_timestamp()  # the rating dated on or before T
        want = [latest[(t, month)] for t in row.tickers]
        assert list(column) == want
        assert all(f"{t}): analyst rating {v:.4g}" in row.prompt or f"{t}: analyst rating {v:.4g}" in row.prompt
                   for t, v in zip(row.tickers, want, strict=True))  # fmt: skip
        for line in prompts.news_lines(row.prompt):  # "2016-03-04 AAPL: AAPL news of 2016-03-04"
            date, ticker = line[:10], line[11:].split(":")[0]
            assert ticker in row.tickers and date <= f"{row.date:%Y-%m-%d}" and line.endswith(f"news of {date}")
    assert states.prompt.map(prompts.news_lines).map(len).gt(0).mean() > 0.9
    assert json.loads((res / "audit.json").read_text())["train_to_test"]
    summary = _strict_json(res / "metrics.json")
    assert {"higher_analyst rating", "higher_eps revision"} <= set(summary["baselines"]) and [
        r["round"] for r in summary["rounds"]
    ] == [0, 1]
    preds = pd.read_parquet(res / "eval" / "round_1" / "predictions.parquet")
    assert preds.state_id.isin(states.state_id).all() and len(preds)


def test_from_another_directory_the_default_config_is_the_checkouts_and_the_run_says_where_it_writes(tmp_path):
    proc = run("snakemake", "-s", ROOT / "Snakefile", "-n", cwd=tmp_path)
    data = "data: sample, the bundled data/sp500_dataset.csv.gz"  # the source read, named first
    results = tmp_path / "results" / "default"
    assert f"hitchhiker: config {ROOT / 'config.yaml'}; {data}; results in {results}" in proc.stderr
    overlay = write_config(tmp_path / "more.yaml", {"rounds": 1})  # --configfile overlays it, and is named too
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", overlay, "-n", cwd=tmp_path)
    assert f"config {ROOT / 'config.yaml'} + {overlay};" in proc.stderr and "grpo_train_round_2" not in proc.stdout
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", ROOT / "config.yaml", "-n", cwd=tmp_path)
    assert f"hitchhiker: config {ROOT / 'config.yaml'}; data:" in proc.stderr  # named once, not "x + x"
    # named as the first --configfile under a weather run, config.yaml is still the default run's:
    # its market section is left out, not refused as the user's own
    files = [ROOT / "config.yaml", ROOT / "configs" / "weather.yaml"]
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", *files, "-n", cwd=tmp_path)
    assert "config.yaml's market section is not read by environment weather" in proc.stderr


def test_nested_overrides_work_as_a_configfile_and_say_so_as_config(tmp_path):
    nested = write_config(tmp_path / "horizon.yaml", {"states": {"horizon": 2}})
    verbose = ["-p", "--quiet", "host"]  # the profile's quiet console, overridden
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", nested, "-n", *verbose, cwd=tmp_path)
    assert '"horizon": 2, "max_prompt_tokens"' in proc.stdout and '"window": 5' in proc.stdout  # merged, not replaced
    nested_text = ["--config", "states={horizon: 2}"]
    proc = run("snakemake", "-s", ROOT / "Snakefile", *nested_text, "-n", cwd=tmp_path, check=False)
    assert proc.returncode != 0 and "pass it with --configfile" in proc.stderr


def _monthly_file(path):
    """Month-end closes of five sample stocks, one of them listed in 2006 (a ragged start)."""
    daily = pd.read_csv(ROOT / "data" / "sp500_dataset.csv.gz", parse_dates=["Date"]).set_index("Date")
    monthly = daily[["AAPL", "MSFT", "JPM", "XOM", "AMD"]].resample("ME").last()
    monthly.loc[:"2005-12-31", "AMD"] = np.nan
    monthly.rename_axis("Date").reset_index().to_csv(path, index=False)
    return path


def test_a_monthly_file_is_worded_audited_and_annualised_as_months(tmp_path):
    cfg = tiny_config(run="monthly", market={"data": {"source": "file", "path": str(_monthly_file(tmp_path / "m.csv")),
                                                   "tickers": ["AAPL", "MSFT", "JPM", "XOM", "AMD"]}})  # fmt: skip
    cfg["states"].update(horizon=1, window=6, stride=1, train={"start": "2006-06-01", "end": "2017-12-31"},
                         test={"start": "2019-01-01", "end": "2022-10-31"})  # fmt: skip
    write_config(tmp_path / "config.yaml", cfg)
    proc = snakemake(tmp_path)
    assert "every ticker trimmed to 2006-01-31 .. 2022-12-31" in proc.stderr
    assert "monthly prices: states.window, horizon, stride and embargo count months" in proc.stderr
    res = tmp_path / "results" / "monthly"
    prompt = pd.read_parquet(res / "states.parquet").prompt.iloc[0]
    assert prompt.startswith("Monthly returns in percent, oldest first, up to this month's close.")
    assert "over the next 1 month?" in prompt
    audit = json.loads((res / "audit.json").read_text())
    assert audit["frequency"] == "monthly" and audit["train_to_test"]["embargo_periods"] == 13
    # the Sharpe ratio is annualised with 12 periods a year, not 252 (checked on a baseline: the
    # tiny model's answers are mostly invalid, and then it has none)
    preds = pd.read_parquet(res / "eval" / "round_0" / "predictions.parquet")
    states = pd.read_parquet(res / "states.parquet")
    evaluated = states[states.state_id.isin(preds.state_id)]
    rows = get("market").baselines(
        evaluated,
        pd.read_parquet(res / "outcomes.parquet"),
        {"benchmark": "none", "cost_bps": 0, "invalid_penalty": -0.05, "returns": "simple"},
    )
    first = rows[rows.baseline == "always_first"]
    port = portfolio_returns(first.reward, first.date, 1, 1).to_numpy()
    got = json.loads((res / "metrics.json").read_text())["baselines"]["always_first"]["sharpe"]["mean"]
    assert got == pytest.approx(sharpe(port, 1, per_year=12)) and abs(got) > 0

    cfg["states"]["horizon"] = 21  # a daily habit, on monthly data: refused before any job
    write_config(tmp_path / "config.yaml", cfg)
    proc = snakemake(tmp_path, "--forceall", check=False)
    message = "config key states.horizon = 21: 21 months with this monthly price table, more than a year"
    assert proc.returncode != 0 and message in proc.stderr
