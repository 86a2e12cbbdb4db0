"""Sweep layer: W&B sweep YAML -> Optuna space, study storage, one trial, the report.
"""
