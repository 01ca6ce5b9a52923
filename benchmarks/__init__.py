"""The book's benchmarks: ``lib/`` measured against the libraries readers would use instead.

Run ``make bench`` (or ``python -m benchmarks``); it writes
``benchmarks/results.json``, which the book's "Benchmarks" page renders without
re-running anything. Every speed figure is a ratio against a reference measured
in the same run, interleaved with ours, so machine load affects both alike.
"""
