"""Config layer: YAML + _include + command-line parsing, the flag dataclasses, training-flag checks and
DeepSpeed/accelerate config checks. Imports nothing above itself.
"""
