localrules:
    fetch_prices,


rule fetch_prices:
    input:
        files=data_step.inputs(config),
        code=code("fetch_prices"),
    output:
        DATA,
    log:
        f"{RESULTS}/logs/fetch_prices.log",
    benchmark:
        f"{RESULTS}/benchmarks/fetch_prices.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        cfg=cfg("fetch_prices"),
    shell:
        "python -m hitchhiker.stages.fetch_prices --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule base_model:
    input:
        code=code("base_model"),
    output:
        directory(policy(0)),
    log:
        f"{RESULTS}/logs/base_model.log",
    benchmark:
        f"{RESULTS}/benchmarks/base_model.tsv"
    conda:
        "../../envs/train.yaml"
    # nothing runs beside it but fetch_prices (2 s): both cores of a 2-core laptop for the
    # tiny model's format warm-up (rules/common.smk, Threads)
    threads: 2
    params:
        cfg=cfg("base_model"),
    shell:
        "python -m hitchhiker.stages.base_model --config {params.cfg:q} --out {output:q} > {log:q} 2>&1"


rule build_states:
    input:
        files=STATE_FILES,
        code=code("build_states"),
        data=DATA,
        policy=policy(0),
    output:
        states=f"{RESULTS}/states.parquet",
        outcomes=f"{RESULTS}/outcomes.parquet",
    log:
        f"{RESULTS}/logs/build_states.log",
    benchmark:
        f"{RESULTS}/benchmarks/build_states.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        cfg=cfg("build_states"),
    shell:
        "python -m hitchhiker.stages.build_states --config {params.cfg:q} --data {input.data:q}"
        " --policy {input.policy:q} --states {output.states:q} --outcomes {output.outcomes:q} > {log:q} 2>&1"


rule audit:
    input:
        files=STATE_FILES,
        code=code("audit"),
        data=DATA,
        states=f"{RESULTS}/states.parquet",
        outcomes=f"{RESULTS}/outcomes.parquet",
    output:
        f"{RESULTS}/audit.json",
    log:
        f"{RESULTS}/logs/audit.log",
    benchmark:
        f"{RESULTS}/benchmarks/audit.tsv"
    conda:
        "../../envs/data.yaml"
    params:
        cfg=cfg("audit"),
    shell:
        "python -m hitchhiker.stages.audit --config {params.cfg:q} --data {input.data:q} --states {input.states:q}"
        " --outcomes {input.outcomes:q} --out {output:q} > {log:q} 2>&1"
