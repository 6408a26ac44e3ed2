rule grpo_train:
    input:
        **(
            {"accelerate": config["train"]["accelerate_config"]}
            if config["train"]["accelerate_config"]
            else {}
        ),
        code=code("grpo_train"),
        buffer=f"{RESULTS}/buffer/round_{{r}}.duckdb",
        policy=lambda w: policy(int(w.r) - 1),
    output:
        directory(f"{RESULTS}/policy/round_{{r}}"),
    log:
        f"{RESULTS}/logs/grpo_train_round_{{r}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/grpo_train_round_{{r}}.tsv"
    conda:
        "../../envs/train.yaml"
    resources:
        **config["resources"]["grpo_train"],
    params:
        cfg=cfg("grpo_train"),
        beside=lambda w: evaluated(int(w.r) - 1),
        # one process per GPU the job was given, or train.num_processes if more (CPU workers)
        nproc=lambda w, resources: max(
            resources.get("gpu", 0), config["train"]["num_processes"]
        ),
        accel=(
            f"--accelerate-config {shlex.quote(config['train']['accelerate_config'])}"
            if config["train"]["accelerate_config"]
            else ""
        ),
    shell:
        "HITCHHIKER_CORES_AFTER={params.beside:q} python -m hitchhiker.launch --nproc {params.nproc} {params.accel} -- --config {params.cfg:q} --round {wildcards.r}"
        " --buffer {input.buffer:q} --policy {input.policy:q} --out {output:q} > {log:q} 2>&1"
