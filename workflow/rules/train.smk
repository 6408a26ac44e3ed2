rule grpo_train:
    input:
        **(
            {"accelerate": config["train"]["accelerate_config"]}
            if config["train"]["accelerate_config"]
            else {}
        ),
        code=code("grpo_train", "policy"),
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
    params:
        cfg=cfg("seed", "model", "rollout", "train"),
        # one process per GPU the job was given, else train.num_processes (CPU workers)
        nproc=lambda w, resources: resources.get("gpu", 0)
        or config["train"]["num_processes"],
        launch=(
            f"--config_file {shlex.quote(config['train']['accelerate_config'])}"
            if config["train"]["accelerate_config"]
            else "--num_machines 1 --mixed_precision no --dynamo_backend no"
        ),
    shell:
        "accelerate launch --num_processes {params.nproc} {params.launch}"
        " -m hitchhiker.grpo_train --config {params.cfg:q} --round {wildcards.r}"
        " --buffer {input.buffer:q} --policy {input.policy:q} --out {output:q} > {log:q} 2>&1"
