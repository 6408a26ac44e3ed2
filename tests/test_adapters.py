"""hitchhiker's environments in other trainers: from TRL (hitchhiker/for_trl.py), a real
GRPOTrainer trains on a run's audited states with the environment's reward; over OpenEnv
(hitchhiker/serve.py), OpenEnv's own client plays episodes against our server. Both rewards
equal the score stage's on the same answers."""

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pandas as pd
import pytest
from transformers import AutoTokenizer

from conftest import ROOT, run, stage, tiny_config, write_config
from hitchhiker import config
from hitchhiker.cli import HitchhikerError
from hitchhiker.for_trl import Task


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """A tiny run up to its audit, as a user would run it before handing its states to TRL."""
    d = tmp_path_factory.mktemp("trl")
    cfg = tiny_config()
    cfg["grounding"] = {"unsupported_claim_penalty": 0.01}  # the grounding terms come along
    write_config(d / "config.yaml", cfg)
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--cores", "2",
        "results/tiny/audit.json", cwd=d)  # fmt: skip
    return d


def _score_stage(d, completions: list, state_ids: list[str], batch: int, run: str = "tiny") -> pd.Series:
    """The score stage's reward of these answers (each a text, or an episode's list of them),
    run as the pipeline runs it (one round)."""
    n = len(completions)
    answers = [c if isinstance(c, list) else [c] for c in completions]
    rollouts = pd.DataFrame({"state_id": state_ids, "round": 1, "sample_idx": range(n), "temperature": 1.0,
                             "completion_ids": [[1]] * n, "logprobs": [[-1.0]] * n, "model_mask": [[1]] * n,
                             "completion": ["\n".join(a) for a in answers], "answers": answers})  # fmt: skip
    prompts = pd.DataFrame({"state_id": sorted(set(state_ids)), "round": 1, "prompt_ids": [[3]] * len(set(state_ids))})
    rollouts.to_parquet(d / f"r{batch}.parquet")
    prompts.to_parquet(d / f"p{batch}.parquet")
    res = d / "results" / run
    stage("score", "--config", d / "config.yaml", "--round", "1", "--rollouts", d / f"r{batch}.parquet",
          "--states", res / "states.parquet", "--outcomes", res / "outcomes.parquet", "--prompts",
          d / f"p{batch}.parquet", "--out", d / f"b{batch}.duckdb")  # fmt: skip
    import duckdb

    with duckdb.connect(str(d / f"b{batch}.duckdb"), read_only=True) as con:
        return con.sql("SELECT reward FROM scores ORDER BY sample_idx").df()["reward"]


@pytest.mark.slow
def test_trls_grpo_trainer_trains_on_the_audited_states_with_the_score_stages_reward(audited, monkeypatch):
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.chdir(audited)
    task = Task("config.yaml")
    states = pd.read_parquet(audited / "results/tiny/states.parquet").query("split == 'train'")
    data = task.dataset()
    assert data["state_id"] == states["state_id"].tolist()
    assert [p[0]["content"] for p in data["prompt"]] == states["prompt"].tolist()

    seen = []

    def reward(prompts, completions, state_id, **kwargs):
        rewards = task.reward(prompts, completions, state_id, **kwargs)
        seen.append(([c[-1]["content"] for c in completions], list(state_id), rewards))
        return rewards

    model = audited / "results/tiny/policy/round_0/model"
    args = GRPOConfig(output_dir=str(audited / "trl"), max_steps=2, per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=24, learning_rate=1e-3, logging_steps=1, report_to=[],
                      save_strategy="no", use_cpu=True, seed=0)  # fmt: skip
    trainer = GRPOTrainer(model=str(model), reward_funcs=reward, train_dataset=data, args=args,
                          processing_class=AutoTokenizer.from_pretrained(model))  # fmt: skip
    trainer.train()
    assert len(seen) == 2 and all(len(texts) == 8 for texts, _, _ in seen)
    assert len({r for _, _, rewards in seen for r in rewards}) > 1  # answers the environment paid differently
    assert trainer.state.log_history[0]["rewards/reward/mean"] == pytest.approx(sum(seen[0][2]) / 8, abs=1e-6)
    for batch, (texts, ids, rewards) in enumerate(seen):
        assert set(ids) <= set(states["state_id"])
        assert _score_stage(audited, texts, ids, batch).tolist() == pytest.approx(rewards, abs=1e-12)


def test_a_task_refuses_what_it_cannot_give_in_one_line(audited, monkeypatch, tmp_path):
    monkeypatch.chdir(audited)
    test = pd.read_parquet(audited / "results/tiny/states.parquet").query("split == 'test'")
    train = Task("config.yaml")
    with pytest.raises(HitchhikerError, match=f"state {min(test.state_id[:1])} is not one of the run's train states"):
        train.reward(completions=["A"], state_id=test.state_id[:1].tolist())
    assert len(Task("config.yaml", split="test").dataset()) == len(test)  # when asked for
    with pytest.raises(HitchhikerError, match="split = 'validation', not 'train' or 'test'"):
        Task("config.yaml", split="validation")
    with pytest.raises(HitchhikerError, match=r"results/tiny/audit.json does not exist: build and audit"):
        Task(audited / "config.yaml", results=tmp_path / "results")


def _serve(cwd, *args) -> tuple[subprocess.Popen, str]:
    """python -m hitchhiker.serve on a free localhost port, as a user starts it, once it answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "hitchhiker.serve", "--config", "config.yaml", "--port", str(port),
                             *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1)
            return proc, url
        except OSError:
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.5)
    raise AssertionError(f"{url} never answered")


@pytest.fixture
def server(audited):
    """python -m hitchhiker.serve on the audited run's train states; its base URL."""
    proc, url = _serve(audited)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.slow
def test_openenvs_client_plays_our_served_states_with_the_score_stages_reward(audited, server):
    from openenv.core import GenericEnvClient

    states = pd.read_parquet(audited / "results/tiny/states.parquet")
    train, test = states.query("split == 'train'"), states.query("split == 'test'")
    pairwise = train[train.format == "pairwise"].state_id.iloc[0]
    answers = ["A", "B because it rose more", "A because A rose 9.99% today", "maybe"]  # a claim not shown; invalid
    with GenericEnvClient(base_url=server).sync() as env:
        first, again = env.reset(seed=3), env.reset(seed=3)
        assert first.observation["state_id"] == again.observation["state_id"] and not first.done
        assert first.observation["prompt"] == train.set_index("state_id").prompt[first.observation["state_id"]]
        played = []
        for text in answers:
            shown = env.reset(state_id=pairwise)
            assert shown.observation["state_id"] == pairwise and shown.reward is None
            played.append(env.step({"text": text}))
        assert all(r.done for r in played) and env.state()["step_count"] == 1
        with pytest.raises(Exception, match="is not one of the run's train states"):
            env.reset(state_id=test.state_id.iloc[0])  # the held-out states only when asked for
    stage_rewards = _score_stage(audited, answers, [pairwise] * len(answers), "served")
    assert [r.reward for r in played] == pytest.approx(stage_rewards.tolist(), abs=1e-12)
    assert [r.observation["score"]["valid"] for r in played] == [True, True, True, False]
    assert played[2].observation["score"]["unsupported_claims"] == 1  # 9.99% is not shown
    assert played[0].observation["outcome"]["tickers"] == train.set_index("state_id").tickers[pairwise].tolist()


@pytest.mark.slow
def test_a_multi_turn_episode_is_served_turn_by_turn_and_paid_as_the_score_stage_pays_it(tmp_path):
    from openenv.core import GenericEnvClient

    cfg = tiny_config(run="seq", environment="sequential", market={"states": {"formats": ["pairwise"], "turns": 3}})
    cfg["states"].update(horizon=9, window=4, stride=5)
    write_config(tmp_path / "config.yaml", cfg)
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--cores", "2",
        "results/seq/audit.json", cwd=tmp_path)  # fmt: skip
    with pytest.raises(HitchhikerError, match="the sequential environment's episodes have several turns"):
        Task(tmp_path / "config.yaml", results=tmp_path / "results").dataset()  # not through a reward function
    proc, url = _serve(tmp_path)
    episodes = [["A=0.7 B=0.3", "A=0.2 B=0.8 because B rose", "B=1"], ["A=1", "nothing", "A=0.5 B=0.5"]]
    played, ids = [], []
    try:
        with GenericEnvClient(base_url=url).sync() as env:
            for seed, answers in enumerate(episodes):
                first = env.reset(seed=seed)
                ids.append(first.observation["state_id"])
                prompts = [first.observation["prompt"]]
                for turn, text in enumerate(answers):
                    result = env.step({"text": text})
                    last = turn == len(answers) - 1
                    assert result.done == last and (result.reward is None) != last
                    prompts.append(result.observation["prompt"])
                assert "Turn 2 of 3" in prompts[1] and "Turn 3 of 3" in prompts[2]  # the environment's turns
                played.append(result)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    stage_rewards = _score_stage(tmp_path, episodes, ids, "seq", run="seq")
    assert [r.reward for r in played] == pytest.approx(stage_rewards.tolist(), abs=1e-12)
    assert [r.observation["score"]["invalid_turns"] for r in played] == [0, 1]


@pytest.mark.slow
def test_a_run_on_an_openenv_server_gives_the_direct_runs_rewards_on_the_same_states_and_answers(tmp_path):
    """environment: openenv against our own served market: every stage of the DAG runs, its
    states are the served run's, and its rewards on the same answers are the direct run's."""
    from hitchhiker import environments

    direct = tmp_path / "direct"
    direct.mkdir()
    cfg = tiny_config()
    cfg["model"]["tiny"]["format_warmup_steps"] = 40  # answers that parse, so that rewards differ
    write_config(direct / "config.yaml", cfg)
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--cores", "2", cwd=direct)
    train, test = _serve(direct), _serve(direct, "--split", "test")
    try:
        remote = tmp_path / "remote"
        remote.mkdir()
        states = pd.read_parquet(direct / "results/tiny/states.parquet")
        rcfg = tiny_config(run="remote", environment="openenv", openenv={"url": train[1], "test_url": test[1]})
        rcfg["states"].update(horizon=1, stride=1)
        for split in ("train", "test"):
            rcfg["states"][split]["max_states"] = int((states.split == split).sum())  # each served state once
        rcfg["model"] = {"name_or_path": str(direct / "results/tiny/policy/round_0/model")}  # the same weights
        write_config(remote / "config.yaml", rcfg)
        proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--cores", "2", cwd=remote)
        assert "not audited: a remote OpenEnv environment's data is the server's" in proc.stderr
        res = remote / "results" / "remote"
        assert (res / "headline.csv").is_file()
        got = pd.read_parquet(res / "states.parquet")
        for split in ("train", "test"):  # the served states, prompts and dates, each once
            want = states[states.split == split].set_index("state_id")
            mine = got[got.split == split].set_index("state_id")
            assert sorted(mine.index) == sorted(want.index)
            assert (mine.prompt == want.prompt[mine.index]).all() and (mine.date == want.date[mine.index]).all()
        # the direct run's own answers, scored through the server: the direct run's rewards
        import duckdb

        with duckdb.connect(str(direct / "results/tiny/buffer/round_1.duckdb"), read_only=True) as con:
            buffer = con.sql(
                "SELECT state_id, completion, s.reward, s.valid, s.correct FROM scores s "
                "JOIN rollouts USING (run, round, state_id, sample_idx) ORDER BY state_id, sample_idx"
            ).df()
        scored = environments.get("openenv").score(buffer[["state_id", "completion"]], got, None, rcfg)
        assert scored.reward.tolist() == pytest.approx(buffer.reward.tolist(), abs=1e-12)
        assert scored.valid.tolist() == buffer.valid.tolist() and buffer.valid.any() and not buffer.valid.all()
        assert scored.correct.fillna(-1).tolist() == buffer.correct.fillna(-1).tolist()
        # greedy answers of the same weights on the same held-out states: the same answers, rewards and figures
        mine = pd.read_parquet(res / "eval/round_0/predictions.parquet").query("mode == 'greedy'")
        want = pd.read_parquet(direct / "results/tiny/eval/round_0/predictions.parquet").query("mode == 'greedy'")
        both = mine.merge(want, on="state_id", suffixes=("", "_direct"))
        assert len(both) == len(want) and (both.completion == both.completion_direct).all()
        assert both.reward.tolist() == pytest.approx(both.reward_direct.tolist(), abs=1e-12)
        figures = [json.loads((r / "eval/round_0/metrics.json").read_text())["greedy"]
                   for r in (res, direct / "results/tiny")]  # fmt: skip
        for key in ("valid_rate", "mean_reward"):
            assert figures[0][key]["mean"] == pytest.approx(figures[1][key]["mean"], abs=1e-12), key
    finally:
        for proc, _ in (train, test):
            proc.terminate()
            proc.wait(timeout=30)


@pytest.mark.slow
def test_a_multi_turn_openenv_server_is_played_turn_by_turn_through_our_dag_and_paid_as_its_score_stage_pays(
    tmp_path,
):
    """environment: openenv with openenv.turns 3 against our served sequential environment:
    rollout and evaluate play each episode turn by turn (the server's "Turn 2 of 3" prompts
    in the completions), the round trains, and the buffer's rewards are the direct
    environment's on the same episodes."""
    from hitchhiker import environments

    direct = tmp_path / "direct"
    direct.mkdir()
    cfg = tiny_config(run="seq", environment="sequential", market={"states": {"formats": ["pairwise"], "turns": 3}})
    cfg["states"].update(horizon=9, window=4, stride=5)
    cfg["model"]["tiny"]["format_warmup_steps"] = 40
    write_config(direct / "config.yaml", cfg)
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--cores", "2",
        "results/seq/audit.json", cwd=direct)  # fmt: skip
    states = pd.read_parquet(direct / "results/seq/states.parquet")
    train, test = _serve(direct), _serve(direct, "--split", "test")
    try:
        remote = tmp_path / "remote"
        remote.mkdir()
        rcfg = tiny_config(run="remote", environment="openenv",
                           openenv={"url": train[1], "test_url": test[1], "turns": 3})  # fmt: skip
        rcfg["states"].update(horizon=1, stride=1)
        for split in ("train", "test"):
            rcfg["states"][split]["max_states"] = int((states.split == split).sum())
        rcfg["model"] = {"name_or_path": str(direct / "results/seq/policy/round_0/model")}
        write_config(remote / "config.yaml", rcfg)
        rcfg["train"]["objective"] = "dpo"
        write_config(remote / "dpo.yaml", rcfg)
        proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "dpo.yaml", "-n", cwd=remote, check=False)
        assert "dpo: the openenv environment's completions hold the environment's turns" in proc.stderr
        run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--cores", "2", cwd=remote)
        res = remote / "results" / "remote"
        rolled = pd.read_parquet(res / "rollouts/round_1.parquet")
        assert (rolled.answers.map(len) == 3).all() and rolled.completion.str.contains("Turn 3 of 3").all()
        assert rolled.model_mask.map(lambda m: 0 < sum(m) < len(m)).all()  # the server's turns are not the model's
        import duckdb

        with duckdb.connect(str(res / "buffer/round_1.duckdb"), read_only=True) as con:
            paid = con.sql("SELECT state_id, sample_idx, reward FROM scores ORDER BY state_id, sample_idx").df()
        episodes = rolled.sort_values(["state_id", "sample_idx"]).reset_index(drop=True)
        by_state = states.set_index("state_id")
        want = environments.get("sequential").score(
            episodes[["state_id", "completion", "answers"]].assign(answers=episodes.answers.map(list)),
            states, pd.read_parquet(direct / "results/seq/outcomes.parquet"), config.validate(cfg)["reward"],
        )  # fmt: skip
        assert paid.reward.tolist() == pytest.approx(want.reward.tolist(), abs=1e-12)
        assert paid.reward.nunique() > 1 and len(by_state) > 0
        greedy = pd.read_parquet(res / "eval/round_1/predictions.parquet").query("mode == 'greedy'")
        assert greedy.completion.str.contains("Turn 3 of 3").all()
        with pytest.raises(HitchhikerError, match="the openenv environment's episodes have several turns"):
            Task(remote / "config.yaml", results=remote / "results").dataset()
    finally:
        for proc, _ in (train, test):
            proc.terminate()
            proc.wait(timeout=30)


def test_an_openenv_server_that_does_not_answer_stops_the_run_before_any_job(tmp_path):
    cfg = tiny_config(environment="openenv", openenv={"url": "http://127.0.0.1:9"})  # the discard port: nothing
    cfg["states"]["horizon"] = 1
    write_config(tmp_path / "config.yaml", cfg)
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "-n", cwd=tmp_path, check=False)
    assert proc.returncode != 0 and "error: openenv server http://127.0.0.1:9: connecting failed (" in proc.stderr
    cfg.pop("openenv")
    write_config(tmp_path / "config.yaml", cfg)
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "-n", cwd=tmp_path, check=False)
    assert "config key openenv.url is required" in proc.stderr
