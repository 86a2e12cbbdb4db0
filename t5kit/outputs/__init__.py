"""Outputs layer: run folder safety, the run record, atomic files, logging, the loss plot, predictions.
"""
