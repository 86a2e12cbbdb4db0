"""Optimizer layer: per-regex parameter groups and Adafactor on stacked parameters.
"""
