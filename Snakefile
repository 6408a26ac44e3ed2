# hitchhiker: fetch_prices -> build_states -> rollout(r) -> score(r) -> grpo_train(r) -> evaluate(r)
# Run: snakemake --cores 2   (see README.md; config.yaml is the default run)
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


# The default run's config.yaml, from the working directory if it has one, else from this
# checkout (snakemake -s path/to/Snakefile elsewhere); --configfile overlays it.
configfile: "config.yaml" if Path("config.yaml").is_file() else f"{workflow.basedir}/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/rollout.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"


rule all:
    input:
        f"{RESULTS}/metrics.json",
        f"{RESULTS}/learning_curve.png",
        f"{RESULTS}/invalid_answers.png",
        expand(f"{RESULTS}/{{name}}.png", name=ENV_PLOTS),
        f"{RESULTS}/headline.csv",


# The console ends on the headline table (summarize's headline.csv), or on the one-line
# errors of the jobs that failed: the profile keeps Snakemake's per-job blocks quiet.
onsuccess:
    print_headline(f"{RESULTS}/headline.csv")


onerror:
    print_errors(f"{RESULTS}/logs")
