"""The pipeline's stages, one module a rule: each parses its arguments, calls the environment
and the core modules, and writes its artifacts atomically. Run any of them by hand:
``python -m hitchhiker.stages.<stage> --help``."""
