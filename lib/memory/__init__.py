"""Memory-augmented networks (chapter 12), one concept per module.

* :mod:`lib.memory.memn2n`: the end-to-end memory network (Sukhbaatar et al., 2015);
* :mod:`lib.memory.turing`: the Turing machine, its 7-tuple and a simulator;
* :mod:`lib.memory.ntm`: the Neural Turing Machine's addressing, reading and
  writing, and the copy task it learns (Graves et al., 2014);
* :mod:`lib.memory.hopfield`: associative memory in a Hopfield network (Hopfield, 1982).

Everything public is re-exported here, so ``from lib.memory import write`` works; so are the
bAbI-style stories the memory network reads, which live in :mod:`lib.tasks.babi`.
"""

from lib.memory.hopfield import (
    CAPACITY,
    HopfieldNetwork,
    Recall,
    energy,
    flip_bits,
    hebbian_weights,
    overlap,
    update_async,
    update_sync,
)
from lib.memory.memn2n import (
    MemN2N,
    MemN2NConfig,
    accuracy,
    position_encoding,
    support_weights,
    train_memn2n,
)
from lib.memory.ntm import (
    NTM,
    CopyRun,
    CosineScore,
    HeadParameters,
    NTMConfig,
    address,
    circular_shift,
    content_weights,
    copy_batch,
    interpolate,
    read,
    sharpen,
    train_copy,
    write,
)
from lib.memory.turing import Configuration, Run, TuringMachine, notes_example
from lib.tasks.babi import TASKS, VOCABULARY, Stories, Story, generate

__all__ = [
    "CAPACITY",
    "TASKS",
    "VOCABULARY",
    "Configuration",
    "CopyRun",
    "CosineScore",
    "HeadParameters",
    "HopfieldNetwork",
    "MemN2N",
    "MemN2NConfig",
    "NTM",
    "NTMConfig",
    "Recall",
    "Run",
    "Stories",
    "Story",
    "TuringMachine",
    "accuracy",
    "address",
    "circular_shift",
    "content_weights",
    "copy_batch",
    "energy",
    "flip_bits",
    "generate",
    "hebbian_weights",
    "interpolate",
    "notes_example",
    "overlap",
    "position_encoding",
    "read",
    "sharpen",
    "support_weights",
    "train_copy",
    "train_memn2n",
    "update_async",
    "update_sync",
    "write",
]
