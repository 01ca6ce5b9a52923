"""Part V, memory: chapter 12's memory-augmented networks, one concept per module.

* :mod:`lib.part5_memory.memn2n`: the end-to-end memory network (Sukhbaatar et al.,
  2015);
* :mod:`lib.part5_memory.turing`: the Turing machine, its 7-tuple and a simulator;
* :mod:`lib.part5_memory.ntm`: the Neural Turing Machine's addressing, reading and
  writing, and the copy task it learns (Graves et al., 2014);
* :mod:`lib.part5_memory.hopfield`: associative memory in a Hopfield network (Hopfield,
  1982);
* :mod:`lib.part5_memory.modern_hopfield`: the modern Hopfield network with continuous
  states, whose update is attention (Ramsauer et al., 2021).

Everything public is re-exported here, so ``from lib.part5_memory import write`` works;
so are the bAbI-style stories the memory network reads, which live in
:mod:`lib.part5_memory.babi`.
"""

from lib.part5_memory.hopfield import (
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
from lib.part5_memory.modern_hopfield import (
    modern_energy,
    modern_update,
    retrieval_weights,
    separation,
)
from lib.part5_memory.memn2n import (
    MemN2N,
    MemN2NConfig,
    accuracy,
    position_encoding,
    support_weights,
    train_memn2n,
)
from lib.part5_memory.ntm import (
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
from lib.part5_memory.turing import Configuration, Run, TuringMachine, notes_example
from lib.part5_memory.babi import TASKS, VOCABULARY, Stories, Story, generate

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
    "modern_energy",
    "modern_update",
    "notes_example",
    "overlap",
    "position_encoding",
    "read",
    "retrieval_weights",
    "separation",
    "sharpen",
    "support_weights",
    "train_copy",
    "train_memn2n",
    "update_async",
    "update_sync",
    "write",
]
