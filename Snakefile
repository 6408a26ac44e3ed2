# hitchhiker: fetch_prices -> build_states -> rollout(r) -> score(r) -> grpo_train(r) -> evaluate(r)
# Run: snakemake --cores 2   (see README.md; config.yaml is the default run)
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/rollout.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"


rule all:
    input:
        f"{RESULTS}/metrics.json",
        f"{RESULTS}/learning_curve.png",
        f"{RESULTS}/equity_curves.png",
        f"{RESULTS}/calibration.png",
        f"{RESULTS}/invalid_answers.png",
