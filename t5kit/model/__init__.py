"""Model layer: tokenizer and model building and checks; attention kernels.
"""
