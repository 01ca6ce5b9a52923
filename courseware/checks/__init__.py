"""Checkers for the book's coding exercises.

A check cell in a chapter calls one ``check_*`` function with the student's
function. The checker runs it on *fresh* random inputs (a new seed every call, so
hard-coding the answers shown in the chapter does not pass), compares the result
with the book's tested implementation, and either prints one line starting with
``✓`` or raises :class:`CheckFailed` with a message a student can act on.

The printed line does not depend on the random inputs, so a passing check cell
has a stable output that nbval can compare. Every checker is registered in
:data:`CHECKS` under the name a check cell calls it by.

Checkers live in one module per chapter (``courseware/checks/attention.py``, ...) and are
re-exported here, so a check cell always writes ``from courseware.checks import check_...``.
A chapter's module is imported when one of its checkers is first asked for (PEP 562), so a
chapter's kernel imports only its own checkers and the lib modules they test: the book's
execution cache (``tools/chapter_runs.py``) then re-runs a chapter only when code it uses changes.
Each is a :class:`Check` written as data (:mod:`courseware.checks.core`): how to draw the
cases, the book's answer to one case, and a table of known wrong answers
(:class:`Slip`) with what to tell a student whose result equals one. Adding an
exercise means writing those few lines; the comparison, the tolerance that
follows the result's dtype and the messages are shared.
"""
import importlib

from courseware.checks.core import Check, CheckFailed, Slip, fresh_generator

# The chapters' checker modules, in chapter order, with the checkers each defines. Written out
# rather than read from the files, which would make every chapter's run depend on every checker
# module (tests/courseware/test_checks.py holds this table to what the modules define).
CHECKERS_BY_MODULE = {
    "activations": ("check_cross_entropy_grad", "check_gelu_grad", "check_relu_init"),
    "optim": ("check_momentum_lr_limit", "check_momentum_rate", "check_radam_path"),
    "rnn": ("check_bptt_terms", "check_gradient_reach", "check_rnn_last_state", "check_window_reach"),
    "gating": ("check_forget_bias", "check_gru_jacobian", "check_lstmp_layer"),
    "word2vec": ("check_cosmul_scores", "check_expected_pairs", "check_sgns_optimum"),
    "lm": ("check_best_baseline", "check_good_turing", "check_kneser_ney", "check_nce_normaliser"),
    "decoding": (
        "check_best_output_log_prob", "check_most_probable_sequence", "check_nucleus_distribution",
        "check_perplexity_temperature",
    ),
    "metrics": ("check_chrf", "check_negation_bleu", "check_rouge_multi"),
    "attention": ("check_attention_backward", "check_masked_softmax_backward", "check_sharpening_scale"),
    "seq2seq": ("check_centre_gradient", "check_coverage_loss", "check_reversal_aer", "check_reversal_reach"),
    "transformer": (
        "check_combined_statistics", "check_padded_cached_step", "check_position_decoding", "check_warmup_for_peak",
    ),
    "memory": (
        "check_hopfield_capacity", "check_modern_update", "check_multi_head_write", "check_projection_weights",
    ),
}
_MODULE_OF = {name: module for module, names in CHECKERS_BY_MODULE.items() for name in names}


def _all_checks() -> dict[str, Check]:
    """The name a check cell calls → its checker (the grader looks checkers up here)."""
    checks = {}
    for module in CHECKERS_BY_MODULE:
        for name, value in vars(importlib.import_module(f"courseware.checks.{module}")).items():
            if name.startswith("check_") and isinstance(value, Check):
                checks[name] = value
    return checks


def __getattr__(name: str):
    if name == "CHECKS":
        value = _all_checks()
    elif name in _MODULE_OF:
        value = getattr(importlib.import_module(f"courseware.checks.{_MODULE_OF[name]}"), name)
    else:
        raise AttributeError(f"module 'courseware.checks' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = ["CHECKS", "Check", "CheckFailed", "Slip", "fresh_generator", *_MODULE_OF]
