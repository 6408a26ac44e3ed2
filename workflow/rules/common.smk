import logging
import re
import shlex
import sys
import time
import warnings
from pathlib import Path

from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod
from snakemake_interface_logger_plugins.common import LogEvent

# This checkout's hitchhiker, as its stage commands get (shell.prefix below), not whichever
# checkout `pip install -e` last pointed at.
sys.path.insert(0, f"{workflow.basedir}/workflow")

from hitchhiker import config as hh_config
from hitchhiker import environments, preflight, sources
from hitchhiker.stages import fetch_prices as data_step
from hitchhiker.cli import HitchhikerError

# The config's schema (the shared one and the environment's own section's, defaults filled),
# with a one-line message naming the key at fault, and the cross-key rules (window order,
# embargo, batch shapes) that JSON schema cannot express;
# then the model path and the engines (hitchhiker/preflight.py) and the environment's data
# (for the market: tickers, faults, frequency, date ranges, features), before any job runs.
_use_conda = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
# which files made the config (the default run's, then each --configfile over it): once each
# (`--configfile config.yaml` names the default run's own file again, and stays the default:
# workflow.configfiles holds the --configfile entries, then the Snakefile's configfile)
_defaults = [
    Path(f) for f in workflow.configfiles if f not in workflow.overwrite_configfiles
]
_default = {f.resolve() for f in _defaults}
_overlays = [
    Path(f) for f in workflow.overwrite_configfiles if Path(f).resolve() not in _default
]
_files = _defaults + _overlays
try:
    # a --configfile lies over config.yaml: another environment's section that only
    # config.yaml gives (its market section, under a weather run) is not this run's
    for _key in hh_config.drop_inherited(config, _defaults, _overlays):
        print(
            f"hitchhiker: config.yaml's {_key} section is not read by environment {config.get('environment', 'market')}",
            file=sys.stderr,
        )
    hh_config.validate(config)
    # train.accelerate_config from the working directory, or, where it is not there, from
    # this checkout: the shipped configs/accelerate/*.yaml work from any directory
    _accel = config["train"]["accelerate_config"]
    if _accel and not Path(_accel).is_file():
        if not Path(workflow.basedir, _accel).is_file():
            raise HitchhikerError(
                f"config key train.accelerate_config: {_accel} does not exist (here or in {workflow.basedir})"
            )
        config["train"]["accelerate_config"] = str(Path(workflow.basedir, _accel))
    preflight.run(config, _use_conda)
    data_step.preflight(config)
except HitchhikerError as err:
    sys.exit(f"hitchhiker: error: {err}")

# Threads: Snakemake runs each job with OMP_NUM_THREADS=1 (torch on one core) and evaluate r
# beside rollout r+1 on a 2-core laptop. Declaring 2 threads for the rules that run beside
# another would run them one at a time, which is slower in all (docs/performance.md); so only
# the jobs that nothing runs beside (base_model, the last round's evaluate) declare 2. Where
# one stage dominates (a batch-64 grpo_train), give it the cores: --set-threads grpo_train=2.
# A round's rollout and grpo_train run beside the previous round's evaluate, if at all: once
# its metrics are written, nothing else of the run can start before they end (the next jobs
# need their output), so they take the run's cores from their next batch or step
# (HITCHHIKER_CORES_AFTER, HITCHHIKER_RUN_CORES: hitchhiker/cli.py's Progress). Local runs
# only: a cluster job has the cores it asked for.
# Stage commands import hitchhiker from this checkout, also inside the per-rule conda envs
# (which hold only third-party packages) and in Slurm jobs (sbatch exports the environment).
# Without per-rule conda envs, a job's `python` is the interpreter running Snakemake (its
# folder first on PATH): `.venv/bin/snakemake` works without activating the virtualenv.
# The console stays open to the stage as descriptor 3 (hitchhiker.cli.console): a line as each
# job starts and ends, and what a run does that its config does not say, while the rest of a
# job's output goes to its log.
shell.prefix(
    # (doubled braces: Snakemake formats the prefix like any shell command)
    "exec 3>&2; export HITCHHIKER_CONSOLE=3; "
    + f"export PYTHONPATH={shlex.quote(f'{workflow.basedir}/workflow')}${{{{PYTHONPATH:+:$PYTHONPATH}}}}; "
    + (
        ""
        if _use_conda
        else f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH; "
    )
    + (
        f"export HITCHHIKER_RUN_CORES={workflow._cores}; "
        if workflow.local_exec and workflow._cores
        else ""
    )
)


# The console (profiles/default): Snakemake's job table as a run starts (also what `-n`
# lists), then hitchhiker's own line as each job starts and ends (hitchhiker/cli.py), not
# Snakemake's "Select jobs to execute...", "Execute 2 jobs...", "Finished jobid: 7 (Rule:
# score)" and "3 of 15 steps (20%) done", which name no rule or say it twice.
def _not_scheduler_chatter(record):
    _one_line_for_a_failed_stage(record)
    return (
        getattr(record, "event", None) not in _CHATTER
        and record.getMessage() != "Select jobs to execute..."
    )


# A stage that fails: Snakemake's RuleException block prints the whole command (every
# job's config as JSON) before the stage's own one-line error; on the console it becomes
# one line naming the job and its exit status (onerror's print_errors then gives the error
# and the log; --verbose keeps the block).
_FAILED = re.compile(
    r"^RuleException:.*HITCHHIKER_CONSOLE.*> '?(?P<log>[^ ']+)\.log'? 2>&1.*non-zero exit status (?P<code>-?\d+)",
    re.S,
)


def _one_line_for_a_failed_stage(record):
    if record.levelno < logging.ERROR or not isinstance(record.msg, str):
        return
    failed = _FAILED.match(record.msg)
    if failed:
        # as cli.run names the job: "evaluate round 0"
        job = Path(failed["log"]).name.replace("_round_", " round ")
        record.msg = f"hitchhiker: {job} failed (exit status {failed['code']})"
        record.args = ()


_CHATTER = {
    LogEvent.JOB_STARTED,
    LogEvent.JOB_FINISHED,
    LogEvent.PROGRESS,
    LogEvent.RESOURCES_INFO,
}
if not workflow.output_settings.verbose:
    logger.addFilter(_not_scheduler_chatter)

# Snakemake 9.27 builds the DAG with an input-size coroutine it never awaits (rules.py); the
# RuntimeWarning it prints at every invocation is its own and harmless.
warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
_STARTED = time.time()

RESULTS = f"results/{config['run']}"
# which files made the config, and where the results go: both depend on the working directory
print(
    f"hitchhiker: config {' + '.join(map(str, _files))}; data: {data_step.describe(config)}; "
    f"results in {Path(RESULTS).resolve()}",
    file=sys.stderr,
)
ROUNDS = list(range(1, config["rounds"] + 1))
_env = environments.get(config["environment"])
# the data step's table, and the figures the environment draws (summarize), each with its
# caption workflow/report/<name>.rst where there is one (a new environment's figure has none
# until someone writes it: `snakemake --report` shows it uncaptioned, and does not fail)
DATA = f"{RESULTS}/{_env.data_name}.parquet"
STATE_FILES = _env.state_files(config)  # what else build_states and the audit read
ENV_PLOTS = _env.plots
ENV_CAPTIONS = {
    name: (
        f"../report/{name}.rst"
        if Path(workflow.basedir, "workflow", "report", f"{name}.rst").is_file()
        else None
    )
    for name in ENV_PLOTS
}


wildcard_constraints:
    r="[1-9][0-9]*",
    e="[0-9]+",


def cfg(stage):
    """The config sections a stage reads (its SECTIONS), as the JSON its --config takes (quote with :q)."""
    return hh_config.subset(config, sources.sections(stage))


def code(stage):
    """The source files a stage runs (its module and every hitchhiker module it imports) as
    inputs: editing one reruns that stage and what follows."""
    return sources.files(stage, config["environment"], config["train"]["objective"])


def policy(r):
    return f"{RESULTS}/policy/round_{r}"


def evaluated(e):
    """What evaluate round e writes last (the job a round's rollout and grpo_train run beside)."""
    return f"{RESULTS}/eval/round_{e}/metrics.json"


def print_headline(path):
    """The headline table, the console's last lines after a run (onsuccess)."""
    if Path(path).is_file():
        import pandas as pd

        table = pd.read_csv(path, dtype=str, keep_default_na=False)
        print(
            f"\nhitchhiker: {path}, held-out {config['evaluate']['split']} states",
            file=sys.stderr,
        )
        print(table.to_string(index=False), file=sys.stderr)


def print_errors(logs):
    """What stopped each job that failed in this invocation (onerror): its one-line error,
    or the last line of its traceback, and its log."""
    for log in sorted(Path(logs).glob("*.log"), key=lambda f: f.stat().st_mtime):
        if log.stat().st_mtime < _STARTED:
            continue
        lines = log.read_text(errors="replace").splitlines()
        said = [line for line in lines if line.startswith("hitchhiker: error:")]
        if said or any(line.startswith("Traceback") for line in lines):
            print(f"{(said or lines)[-1]} (log: {log})", file=sys.stderr)
