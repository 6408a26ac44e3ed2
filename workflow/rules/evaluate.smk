rule evaluate:
    input:
        code=code("evaluate"),
        states=f"{RESULTS}/states.parquet",
        outcomes=f"{RESULTS}/outcomes.parquet",
        audit=f"{RESULTS}/audit.json",
        policy=lambda w: policy(int(w.e)),
    output:
        predictions=f"{RESULTS}/eval/round_{{e}}/predictions.parquet",
        metrics=f"{RESULTS}/eval/round_{{e}}/metrics.json",
    log:
        f"{RESULTS}/logs/evaluate_round_{{e}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evaluate_round_{{e}}.tsv"
    conda:
        "../../envs/evaluate.yaml"
    # the last round's evaluate runs alone (only summarize follows it): both cores of a
    # 2-core laptop (rules/common.smk, Threads); each other round's runs beside a rollout
    threads: lambda w: 2 if int(w.e) == config["rounds"] else 1
    resources:
        **config["resources"]["evaluate"],
    params:
        cfg=cfg("evaluate"),
    shell:
        "python -m hitchhiker.stages.evaluate --config {params.cfg:q} --round {wildcards.e} --states {input.states:q}"
        " --outcomes {input.outcomes:q} --policy {input.policy:q} --predictions {output.predictions:q}"
        " --metrics {output.metrics:q} > {log:q} 2>&1"


rule summarize:
    input:
        code=code("summarize"),
        states=f"{RESULTS}/states.parquet",
        outcomes=f"{RESULTS}/outcomes.parquet",
        predictions=expand(
            f"{RESULTS}/eval/round_{{e}}/predictions.parquet", e=[0, *ROUNDS]
        ),
        metrics=expand(f"{RESULTS}/eval/round_{{e}}/metrics.json", e=[0, *ROUNDS]),
        buffer=f"{RESULTS}/buffer/round_{ROUNDS[-1]}.duckdb",
    output:
        json=f"{RESULTS}/metrics.json",
        plot=report(
            f"{RESULTS}/learning_curve.png",
            caption="../report/learning_curve.rst",
            category="Evaluation",
        ),
        headline=report(
            f"{RESULTS}/headline.csv",
            caption="../report/headline.rst",
            category="Evaluation",
        ),
        invalid=report(
            f"{RESULTS}/invalid_answers.png",
            caption="../report/invalid_answers.rst",
            category="Evaluation",
        ),
        env_plots=[
            report(
                f"{RESULTS}/{name}.png",
                caption=ENV_CAPTIONS[name],
                category="Evaluation",
            )
            for name in ENV_PLOTS
        ],
    log:
        f"{RESULTS}/logs/summarize.log",
    conda:
        "../../envs/evaluate.yaml"
    params:
        cfg=cfg("summarize"),
    shell:
        "python -m hitchhiker.stages.summarize --config {params.cfg:q} --states {input.states:q}"
        " --outcomes {input.outcomes:q} --predictions {input.predictions:q} --metrics {input.metrics:q}"
        " --buffer {input.buffer:q} --out-json {output.json:q} --out-plot {output.plot:q} --out-invalid {output.invalid:q}"
        " --out-env-plots {output.env_plots:q}"
        " --out-headline {output.headline:q} > {log:q} 2>&1"
