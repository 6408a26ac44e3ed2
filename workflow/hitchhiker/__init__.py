"""hitchhiker: post-train language models with GRPO on environment feedback.

One module per pipeline stage (fetch_prices, build_states, base_model, rollout, score,
grpo_train, evaluate, summarize), each a command: ``python -m hitchhiker.<stage> --help``.
"""

__version__ = "0.1.0"
