"""Train layer: the pre-training and task trainers and what they are made of (checkpoints, manifest,
non-finite guard, stream resume, pre-emption, deferred reads, callbacks).
"""
