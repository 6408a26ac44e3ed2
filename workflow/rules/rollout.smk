rule rollout:
    input:
        code=code("rollout"),
        states=f"{RESULTS}/states.parquet",
        outcomes=f"{RESULTS}/outcomes.parquet",  # read only under rollout.dynamic_sampling
        audit=f"{RESULTS}/audit.json",
        policy=lambda w: policy(int(w.r) - 1),
    output:
        rollouts=f"{RESULTS}/rollouts/round_{{r}}.parquet",
        prompts=f"{RESULTS}/rollouts/round_{{r}}.prompts.parquet",
    log:
        f"{RESULTS}/logs/rollout_round_{{r}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/rollout_round_{{r}}.tsv"
    conda:
        "../../envs/rollout.yaml"
    resources:
        **config["resources"]["rollout"],
    params:
        cfg=cfg("rollout"),
        beside=lambda w: evaluated(int(w.r) - 1),
    shell:
        "HITCHHIKER_CORES_AFTER={params.beside:q} python -m hitchhiker.stages.rollout --config {params.cfg:q} --round {wildcards.r} --states {input.states:q}"
        " --outcomes {input.outcomes:q} --policy {input.policy:q} --out {output.rollouts:q} --prompts {output.prompts:q} > {log:q} 2>&1"


rule score:
    input:
        code=code("score"),
        rollouts=f"{RESULTS}/rollouts/round_{{r}}.parquet",
        prompts=f"{RESULTS}/rollouts/round_{{r}}.prompts.parquet",
        states=f"{RESULTS}/states.parquet",
        outcomes=f"{RESULTS}/outcomes.parquet",
        previous=lambda w: (
            [f"{RESULTS}/buffer/round_{int(w.r) - 1}.duckdb"] if int(w.r) > 1 else []
        ),
    output:
        f"{RESULTS}/buffer/round_{{r}}.duckdb",
    log:
        f"{RESULTS}/logs/score_round_{{r}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/score_round_{{r}}.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        cfg=cfg("score"),
        previous=lambda w, input: (
            f"--previous {shlex.quote(input.previous[0])}" if input.previous else ""
        ),
    shell:
        "python -m hitchhiker.stages.score --config {params.cfg:q} --round {wildcards.r} --rollouts {input.rollouts:q}"
        " --states {input.states:q} --outcomes {input.outcomes:q} --prompts {input.prompts:q} {params.previous}"
        " --out {output:q} > {log:q} 2>&1"
