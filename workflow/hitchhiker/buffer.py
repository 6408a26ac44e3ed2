"""The replay buffer: one DuckDB file per round, holding every round so far.

The buffer of round r is a copy of round r-1's with round r's rows added, so every round's
buffer is an immutable artifact (Snakemake's) and the file accumulates across rounds. Tables
(keys in brackets; writing a round again replaces its rows):
  states    [run, state_id]                    the states the rollouts so far were drawn from
                                                (the environment's columns)
  outcomes  [run, state_id]                    their outcomes (the environment's columns)
  prompts   [run, round, state_id]              the first prompt's token ids the round's policy saw
  rollouts  [run, round, state_id, sample_idx]  completions (whole episodes: completion_ids run
                                                from the end of the prompt to the end of the
                                                last answer), their behaviour logprobs,
                                                model_mask (1 on the model's tokens, 0 on the
                                                environment's turns) and answers (per turn)
  scores    [run, round, state_id, sample_idx]  what the environment's score gives (action,
                                                valid, invalid_reason, claim counts, ...),
                                                environment_reward (its reward) and reward (with
                                                the grounding terms): what GRPO trains on
score writes a round (:func:`write`, scoring while the round's inputs are written); grpo_train
reads it back (:func:`replay`, and for the full_information objective :func:`outcomes`).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from hitchhiker import atomic
from hitchhiker.cli import HitchhikerError

if TYPE_CHECKING:  # not imported here: score opens the buffer before pandas and pyarrow load
    import pandas as pd
    import pyarrow as pa

ROWS = 16_384  # a row group (see write)
KEYS = {  # each table's key after run; writing a round again replaces the round's rows
    "states": ["state_id"],
    "outcomes": ["state_id"],
    "prompts": ["round", "state_id"],
    "rollouts": ["round", "state_id", "sample_idx"],
    "scores": ["round", "state_id", "sample_idx"],
}


class Round:
    """The rows of one round going into a buffer: :meth:`insert` hands tables to DuckDB,
    which writes them on threads of its own (its inserts release the GIL, and appends to
    different tables do not conflict), so that the caller's Python and the writing share
    the two cores."""

    def __init__(self, con: duckdb.DuckDBPyConnection, pool: ThreadPoolExecutor, run: str, round_: int):
        self._con, self._pool, self._run, self._round = con, pool, run, round_
        self._inserts: list[Future] = []

    def insert(self, tables: dict[str, pd.DataFrame | pa.Table | Path]) -> None:
        """This round's rows of ``tables`` (a Path is a Parquet file DuckDB reads itself) in
        place of any the buffer holds, in one transaction, written in the background."""
        cursor = self._con.cursor()  # a connection of its own, on the same database
        self._inserts.append(self._pool.submit(_insert, cursor, self._run, self._round, tables))

    def wait(self) -> None:
        """Until every insert is written; raises the first one's error."""
        for insert in self._inserts:
            insert.result()


@contextlib.contextmanager
def write(out: str | Path, previous: str | Path | None, run: str, round_: int) -> Iterator[Round]:
    """The buffer of round ``round_``: ``previous`` (round r-1's, or None) with the rows the
    block inserts (:meth:`Round.insert`), written atomically to ``out`` once the block ends
    and every insert is written. If the block raises, nothing is written."""
    if previous:
        with _read(previous, "previous replay buffer"):  # refused here, not as the copy's DuckDB error
            pass
    with atomic.path(out) as tmp:
        if previous:
            shutil.copyfile(previous, tmp)
        # Each insert runs on the pool's thread that executes it, with a connection of its own;
        # threads=2 gives DuckDB one worker more, with which it scans a table in batches
        # (:func:`_scannable`) on both cores: the scores, the insert the caller waits for last.
        # Row groups of ROWS (DuckDB's default is 122,880): each insert then compresses and
        # writes its rows itself, where a smaller append waited for one single-threaded
        # checkpoint at the end (benchmarks/score: 1.35 -> 1.1 s at 100k rollouts, a file 1.3x
        # the size). Two pool threads, one a core: an insert submitted while the other is under
        # way starts at once.
        with duckdb.connect(config={"threads": 2}) as con, ThreadPoolExecutor(2) as pool:
            con.execute(f"ATTACH ? AS buffer (ROW_GROUP_SIZE {ROWS})", [str(tmp)])
            round_rows = Round(con, pool, run, round_)
            yield round_rows  # on an error, leaving the pool waits for the inserts under way
            round_rows.wait()


def _insert(con, run: str, round_: int, tables: dict[str, pd.DataFrame | pa.Table | Path]) -> None:
    """Round ``round_``'s rows of ``tables`` in place of those the buffer holds, in one transaction."""
    # table names are our constants; values always travel as parameters or registered frames
    con.execute("USE buffer")  # here, not on the caller's thread, which a checkpoint below would hold up
    for name, table in tables.items():
        con.register(f"{name}_in", con.read_parquet(str(table)) if isinstance(table, Path) else _scannable(table))
        # the columns are the environment's: each table takes the first round's
        con.execute(f"CREATE TABLE IF NOT EXISTS {name} AS SELECT ''::VARCHAR AS run, * FROM {name}_in LIMIT 0")
        _type_null_columns(con, name)
    # created outside the transaction: a table created inside it and filled with more than
    # one row group read back empty in the same connection after COMMIT (DuckDB 1.x)
    con.execute("BEGIN TRANSACTION")
    for name in tables:
        if KEYS[name] == ["state_id"]:  # a state drawn again in a later round is replaced
            con.execute(f"DELETE FROM {name} WHERE run = ? AND state_id IN (SELECT state_id FROM {name}_in)", [run])
        else:
            con.execute(f"DELETE FROM {name} WHERE run = ? AND round = ?", [run, round_])
        con.execute(f"INSERT INTO {name} BY NAME SELECT ?::VARCHAR AS run, * FROM {name}_in", [run])
    con.execute("COMMIT")
    # Now, on this thread, not at close: rows short of a row group (a round's prompts, 12,500
    # lists of 200 ids at 100k rollouts) wait in the write-ahead log, and writing them into
    # the file took 0.09 s at the end of benchmarks/score. FORCE waits for the other
    # inserts' transactions to end (DuckDB >= 1.4: it no longer aborts them).
    con.execute("FORCE CHECKPOINT buffer")
    for name in tables:
        con.unregister(f"{name}_in")


def _type_null_columns(con, name: str) -> None:
    """A column the table was created with while all its values were missing (a round with no
    invalid answer, or none that chose a label) has DuckDB's type NULL, into which no value
    casts: it takes the type the same column has in the rows going in now, if they hold one."""
    held = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_catalog = 'buffer' AND table_name = ? "
        """AND data_type = '"NULL"'""",
        [name],
    ).fetchall()
    if held:
        incoming = {column: kind for column, kind, *_ in con.execute(f"DESCRIBE SELECT * FROM {name}_in").fetchall()}
        for (column,) in held:
            if incoming.get(column, '"NULL"') != '"NULL"':
                con.execute(f'ALTER TABLE {name} ALTER COLUMN "{column}" TYPE {incoming[column]}')


def _scannable(table: pd.DataFrame | pa.Table) -> pa.Table:
    """``table`` as Arrow in batches of a row group, which DuckDB scans on all its threads; a
    pandas frame, or an Arrow table in one batch, it scans on one (the scores' insert at 100k
    rollouts: 0.11 -> 0.06 s)."""
    import pyarrow as pa  # here: loaded by the time a table comes from memory (see score)

    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    return pa.Table.from_batches(table.to_batches(ROWS), table.schema)


def _score_columns(con) -> set[str]:
    """The columns of the buffer's scores table (each environment stores its own)."""
    sql = "SELECT column_name FROM information_schema.columns WHERE table_name = 'scores'"
    return {c for (c,) in con.execute(sql).fetchall()}


def replay(buffer: str | Path, run: str, round_: int, rounds: int = 1) -> pd.DataFrame:
    """The samples of rounds round_ - rounds + 1 .. round_ with their rewards, one GRPO group
    per (round, state) named "round/state_id", ordered by group and sample index; and
    reason_paid and grounding (what the grounding terms added to the environment's reward:
    the reason bonus less the claims' penalty) where the score stored reason_paid
    (grounding.reason_bonus), else null."""
    with _read(buffer) as con:
        paid = (
            "s.reason_paid, s.reward - s.environment_reward AS grounding"
            if "reason_paid" in _score_columns(con)
            else "NULL::DOUBLE AS reason_paid, NULL::DOUBLE AS grounding"
        )
        return con.execute(
            f"""SELECT r.round || '/' || r.state_id AS "group", r.round, r.state_id, r.sample_idx, p.prompt_ids,
                      r.completion_ids, r.logprobs, r.model_mask, s.reward, {paid}
               FROM rollouts r JOIN scores s USING (run, round, state_id, sample_idx)
               JOIN prompts p USING (run, round, state_id)
               WHERE r.run = ? AND r.round BETWEEN ? AND ? ORDER BY r.round, r.state_id, r.sample_idx""",
            [run, round_ - rounds + 1, round_],
        ).df()


def group_stats(buffer: str | Path, run: str) -> pd.DataFrame:
    """Per round of the buffer, what its groups give GRPO to learn from: ``groups``, the share
    with no reward spread (``zero_spread``: every sample paid the same, so every advantage is
    0 and the group trains nothing), the entropy of the answer's first word, the action, over
    the round's samples (``action_entropy``, in bits; an invalid answer counts as one more
    word) and the most common action with its share (``top_action``, ``top_action_share``).
    An environment whose score gives no action column gets entropy and top action missing."""
    with _read(buffer) as con:
        action = "coalesce(CAST(action AS VARCHAR), '(invalid)')" if "action" in _score_columns(con) else "NULL"
        return con.execute(
            f"""WITH s AS (SELECT round, state_id, reward, {action} AS action FROM scores WHERE run = ?),
               g AS (SELECT round, count(*) AS groups, avg(CAST(max_r = min_r AS DOUBLE)) AS zero_spread
                     FROM (SELECT round, state_id, max(reward) AS max_r, min(reward) AS min_r
                           FROM s GROUP BY round, state_id) GROUP BY round),
               a AS (SELECT round, action, count(*) / sum(count(*)) OVER (PARTITION BY round) AS p
                     FROM s WHERE action IS NOT NULL GROUP BY round, action),
               e AS (SELECT round, 0.0 - sum(p * log2(p)) AS action_entropy, arg_max(action, p) AS top_action,
                            max(p) AS top_action_share FROM a GROUP BY round)
               SELECT g.round, g.groups, g.zero_spread, e.action_entropy, e.top_action, e.top_action_share
               FROM g LEFT JOIN e USING (round) ORDER BY g.round""",
            [run],
        ).df()


def outcomes(buffer: str | Path, run: str, state_ids) -> pd.DataFrame:
    """The stored outcomes of ``state_ids`` (the environment's columns)."""
    state_ids = state_ids.tolist() if hasattr(state_ids, "tolist") else list(state_ids)  # DuckDB takes no NumPy scalar
    with _read(buffer) as con:
        return con.execute(
            """SELECT o.* EXCLUDE (run) FROM outcomes o JOIN (SELECT unnest(?) AS state_id) USING (state_id)
               WHERE o.run = ? ORDER BY state_id""",
            [state_ids, run],
        ).df()


@contextlib.contextmanager
def _read(buffer: str | Path, what: str = "replay buffer") -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to ``buffer``; a file that is not a replay buffer (another
    artifact, a DuckDB file without the buffer's tables) is refused in one line."""
    if not Path(buffer).is_file():
        raise HitchhikerError(f"{what} {buffer} does not exist")
    try:
        con = duckdb.connect(str(buffer), read_only=True)
    except duckdb.Error as err:
        raise HitchhikerError(f"{what} {buffer}: DuckDB cannot open it ({err}): is it the right artifact?") from None
    with con:
        tables = {name for (name,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        missing = [name for name in KEYS if name not in tables]
        if missing:
            raise HitchhikerError(f"{what} {buffer} lacks table(s) {', '.join(missing)}: is it the right artifact?")
        yield con
