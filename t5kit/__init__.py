"""T5 training toolkit: the library the entry scripts at the repository root are made of, one folder per layer.

Imports flow one way: entry scripts -> train -> (data, model, optim, outputs) -> config -> errors
(docs/architecture.md).
"""
