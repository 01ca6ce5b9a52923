"""Weights of chapter 10's models that are too slow to train in a notebook, shipped with the package.

``python -m lib.weights`` (:mod:`lib.weights.__main__`) trains them again,
deterministically, and writes the ``.pt`` files here; chapter 10 reads them with
:func:`lib.seq2seq.load_seq2seq` from :data:`lib.seq2seq.WEIGHTS_DIR`.
"""
