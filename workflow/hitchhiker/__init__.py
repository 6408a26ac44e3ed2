"""hitchhiker: post-train language models with GRPO on environment feedback.

stages/        one module per pipeline rule, each a command: ``python -m hitchhiker.stages.<stage> --help``
training/      the objectives (one module each) and the trainers they build
environments/  the contract (base.py) and the environments: market/ (its family), weather
the rest       what every stage uses: config, buffer, artifacts, generation, policy, metrics, ...
"""

import os

# Arrow allocates through the C library's malloc, not pyarrow's bundled mimalloc, whose fresh
# segments the kernel backs with transparent huge pages and zeroes 2 MB at a time (a quarter of
# the score stage's CPU time; docs/performance.md). Arrow reads the variable when it loads, so
# it is set here, where every stage command starts; a value the user set wins.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

__version__ = "0.1.0"
