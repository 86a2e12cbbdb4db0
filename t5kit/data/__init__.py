"""Data layer: pre-training corpora (load, tokenise, pack, streams) and task data (read, format, tokenise, mix).
"""
