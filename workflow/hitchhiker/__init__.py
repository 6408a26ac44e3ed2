"""hitchhiker: post-train language models with GRPO on environment feedback.

One module per pipeline stage (fetch_prices, build_states, base_model, rollout, score,
grpo_train, evaluate, summarize), each a command: ``python -m hitchhiker.<stage> --help``.
"""

import os

# Arrow allocates through the C library's malloc, not the mimalloc bundled with pyarrow,
# whose fresh segments the kernel backs with transparent huge pages and zeroes 2 MB at a
# time: in score at 100k rollouts a quarter of the CPU samples were the kernel's clear_page,
# half of them under mimalloc; with malloc, 2%. benchmarks/score at 100k: 0.86-0.88 s against
# 0.91-0.96, peak 0.37 GB against 0.49; benchmarks/states at 255k states 6.5-7.0 s against
# 7.9-8.0, peak 1.13 GB against 1.24. Arrow reads the variable when it loads (set_memory_pool
# later does not reach its C++ readers), so it is set here, where every stage command starts,
# before anything imports pyarrow; a value the user set wins.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

__version__ = "0.1.0"
