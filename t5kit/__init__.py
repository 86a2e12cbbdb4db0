"""T5 training toolkit: the library the entry scripts at the repository root are made of, one folder per layer.

Imports flow one way, in one strict order: entry scripts -> cli -> train, sweep -> outputs -> model, optim -> metrics
-> data -> config -> errors, constants (docs/architecture.md; tests/test_layout.py checks every import).
"""
