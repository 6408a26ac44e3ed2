"""The replay buffer's writer: rounds accumulate, a round written again replaces its rows, and
an error while a round is written (score's scoring, or an insert) leaves no buffer behind."""

import subprocess
import sys

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from hitchhiker import buffer
from hitchhiker.environments.market import answers


def _round(r: int, states: list[int], reward: float) -> tuple[dict, pd.DataFrame]:
    rows = [(s, i) for s in states for i in range(2)]
    tables = {
        "states": pa.table({"state_id": states, "prompt": [f"state {s}, seen in round {r}" for s in states]}),
        "outcomes": pd.DataFrame({"state_id": states, "forward_return": [0.01 * s for s in states]}),
        "prompts": pa.table({"round": [r] * len(states), "state_id": states, "prompt_ids": [[s] for s in states]}),
        "rollouts": pa.table(
            {
                "round": [r] * len(rows),
                "state_id": [s for s, _ in rows],
                "sample_idx": [i for _, i in rows],
                "completion_ids": [[s, i] for s, i in rows],
                "logprobs": [[-0.5, -0.25]] * len(rows),
            }
        ),
    }
    scores = pd.DataFrame(
        {
            "round": r,
            "state_id": [s for s, _ in rows],
            "sample_idx": [i for _, i in rows],
            "valid": True,
            "reward": reward,
            "unsupported_claims": 0,
        }
    )
    return tables, scores


def _write(out, previous, r: int, tables: dict, scores: pd.DataFrame) -> None:
    with buffer.write(out, previous, "run", r) as rows:  # as score does: token tables, then states, then scores
        rows.insert({k: tables[k] for k in ("rollouts", "prompts")})
        rows.insert({k: tables[k] for k in ("states", "outcomes")})
        rows.insert({"scores": scores})


PER_ROUND = "SELECT round, count(*), sum(reward) FROM scores GROUP BY round ORDER BY 1"


def _count(path, sql: str):
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_rounds_accumulate_and_a_round_written_again_replaces_its_rows(tmp_path):
    t1, s1 = _round(1, [1, 2], 1.0)
    _write(tmp_path / "r1.duckdb", None, 1, t1, s1)
    t2, s2 = _round(2, [2, 3], 2.0)  # state 2 drawn again: its row is replaced, not repeated
    _write(tmp_path / "r2.duckdb", tmp_path / "r1.duckdb", 2, t2, s2)
    assert _count(tmp_path / "r2.duckdb", PER_ROUND) == [(1, 4, 4.0), (2, 4, 8.0)]
    assert _count(tmp_path / "r2.duckdb", "SELECT state_id, prompt FROM states ORDER BY 1") == [
        (1, "state 1, seen in round 1"),
        (2, "state 2, seen in round 2"),
        (3, "state 3, seen in round 2"),
    ]
    t2b, s2b = _round(2, [3], 5.0)  # round 2 again (a rerun): its rows only are replaced
    _write(tmp_path / "r2b.duckdb", tmp_path / "r2.duckdb", 2, t2b, s2b)
    assert _count(tmp_path / "r2b.duckdb", PER_ROUND) == [(1, 4, 4.0), (2, 2, 10.0)]
    assert _count(tmp_path / "r2b.duckdb", "SELECT round, count(*) FROM rollouts GROUP BY round ORDER BY 1") == [
        (1, 4),
        (2, 2),
    ]
    assert _count(tmp_path / "r1.duckdb", PER_ROUND) == [(1, 4, 4.0)]  # the previous round's file as it was


def test_a_scorer_that_fails_leaves_no_buffer(tmp_path):
    tables, _ = _round(1, [1, 2], 1.0)
    with (
        pytest.raises(ValueError, match="could not score"),
        buffer.write(tmp_path / "r1.duckdb", None, "run", 1) as rows,
    ):
        rows.insert(tables)  # under way when the scoring fails
        raise ValueError("the environment could not score")
    assert list(tmp_path.iterdir()) == []  # neither the buffer nor a temporary


def test_an_insert_that_fails_leaves_no_buffer(tmp_path):
    tables, scores = _round(1, [1, 2], 1.0)
    (tmp_path / "in").mkdir()
    with pytest.raises(duckdb.IOException, match=r"no-such\.parquet"):
        _write(tmp_path / "r1.duckdb", None, 1, {**tables, "prompts": tmp_path / "in" / "no-such.parquet"}, scores)
    assert list(tmp_path.iterdir()) == [tmp_path / "in"]  # neither the buffer nor a temporary


def test_rankings_fit_a_buffer_whose_first_round_ranked_nothing(tmp_path):
    # round 1's answers name one label each, round 2's include a ranking: score_many's ranking
    # column is list<int64> either way (an empty list of NULL type would refuse the numbers)
    cfg = {"invalid_penalty": -0.05, "cost_bps": 0, "benchmark": "none", "returns": "simple"}
    for r, texts in ((1, ["A", "B"]), (2, ["B>A", "A"])):
        tables, scores = _round(r, [r], 1.0)
        scored = answers.score_many(texts, np.array(["pairwise"] * 2), np.full((2, 2), 0.01), np.array([2, 2]), cfg)
        scores["ranking"] = scored["ranking"]
        previous = tmp_path / "r1.duckdb" if r == 2 else None
        _write(tmp_path / f"r{r}.duckdb", previous, r, tables, scores)
    sql = "SELECT round, ranking FROM scores ORDER BY round, sample_idx"
    assert _count(tmp_path / "r2.duckdb", sql) == [(1, []), (1, []), (2, [1, 0]), (2, [])]


def test_scores_longer_than_a_row_group_go_in_whole_and_in_order(tmp_path):
    # the scores go to DuckDB as Arrow batches of a row group, scanned on its two threads
    # (buffer._scannable): the rows, their order, types and NULLs as DuckDB's own scan of the
    # frame gives them
    n = 2 * buffer.ROWS + 5
    tables, _ = _round(1, [1], 1.0)
    i = np.arange(n)
    scores = pd.DataFrame(
        {
            "round": 1,
            "state_id": i // 4,
            "sample_idx": i % 4,
            "reward": np.where(i % 7 == 0, np.nan, i / n),
            "invalid_reason": np.where(i % 3 == 0, None, "no answer"),
            "weights": [[0.5, 0.5]] * n,
        }
    )
    _write(tmp_path / "r1.duckdb", None, 1, tables, scores)
    with duckdb.connect() as con:
        con.register("frame", scores)
        expected = con.execute("SELECT * FROM frame").fetchall()
        described = con.execute("DESCRIBE SELECT * FROM frame").fetchall()
    assert len(expected) == n and expected[0][4] is None and expected[1][3] is not None
    assert _count(tmp_path / "r1.duckdb", "SELECT * EXCLUDE (run) FROM scores") == expected
    assert _count(tmp_path / "r1.duckdb", "DESCRIBE SELECT * EXCLUDE (run) FROM scores") == described


@pytest.mark.parametrize("given, backend", [(None, "system"), ("jemalloc", "jemalloc")])
def test_a_stage_allocates_arrow_memory_through_malloc_unless_told_otherwise(given, backend, monkeypatch):
    """hitchhiker/__init__.py sets Arrow's pool before any stage loads pyarrow (mimalloc's
    huge-page segments cost score and build_states time and memory); a user's choice stands."""
    if given:
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", given)
    else:
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    code = "import hitchhiker.stages.score, pyarrow as pa; print(pa.default_memory_pool().backend_name)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == backend


def test_a_column_missing_in_every_row_of_the_first_round_takes_a_later_rounds_type(tmp_path):
    """A round with no invalid answer, or none that chose a label, stores that column as
    DuckDB's type NULL; a later round's text in it was a ConversionException."""
    t1, s1 = _round(1, [1, 2], 1.0)
    _write(tmp_path / "r1.duckdb", None, 1, t1, s1.assign(action=None, ranking=None))
    t2, s2 = _round(2, [3], 2.0)
    _write(tmp_path / "r2.duckdb", tmp_path / "r1.duckdb", 2, t2, s2.assign(action=["A", None], ranking=None))
    t3, s3 = _round(3, [4], 3.0)  # missing again in a later round: still stored
    _write(tmp_path / "r3.duckdb", tmp_path / "r2.duckdb", 3, t3, s3.assign(action=None, ranking=[[1, 0], [0, 1]]))
    got = _count(
        tmp_path / "r3.duckdb", "SELECT round, action, ranking FROM scores ORDER BY round, state_id, sample_idx"
    )
    assert got == [(1, None, None)] * 4 + [(2, "A", None), (2, None, None), (3, None, [1, 0]), (3, None, [0, 1])]
    types = dict(_count(tmp_path / "r3.duckdb", "SELECT column_name, data_type FROM information_schema.columns"))
    assert types["action"] == "VARCHAR" and types["ranking"] == "BIGINT[]"


def test_group_stats_count_the_groups_without_reward_spread_and_the_first_words_spread(tmp_path):
    t1, s1 = _round(1, [1, 2, 3, 4], 0.0)  # two samples a state
    s1["reward"] = [0.1, 0.1, 0.1, -0.2, -0.05, -0.05, 0.3, 0.3]  # states 1, 3 and 4: no spread
    s1["action"] = ["A", "A", "A", "B", None, None, "B", "B"]  # an invalid answer has no action
    _write(tmp_path / "r1.duckdb", None, 1, t1, s1)
    t2, s2 = _round(2, [5, 6], 1.0)  # every group alike, every sample "A"
    s2["action"] = "A"
    _write(tmp_path / "r2.duckdb", tmp_path / "r1.duckdb", 2, t2, s2)
    stats = buffer.group_stats(tmp_path / "r2.duckdb", "run")
    assert stats["round"].tolist() == [1, 2] and stats["groups"].tolist() == [4, 2]
    assert stats["zero_spread"].tolist() == [0.75, 1.0]
    # round 1's first words: A 3/8, B 3/8, invalid 2/8
    assert stats["action_entropy"][0] == pytest.approx(-(2 * 3 / 8 * np.log2(3 / 8) + 2 / 8 * np.log2(2 / 8)))
    assert stats["top_action"][0] in ("A", "B") and stats["top_action_share"][0] == pytest.approx(3 / 8)
    assert stats["action_entropy"][1] == 0 and (stats["top_action"][1], stats["top_action_share"][1]) == ("A", 1.0)
    t3, s3 = _round(1, [1], 0.0)  # an environment whose score gives no action
    _write(tmp_path / "plain.duckdb", None, 1, t3, s3)
    plain = buffer.group_stats(tmp_path / "plain.duckdb", "run")
    assert plain["zero_spread"].tolist() == [1.0] and plain["top_action"].isna().all()
