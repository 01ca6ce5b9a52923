"""Benchmarks of ``lib/`` against the libraries a reader would use instead.

Each function returns a list of :class:`~benchmarks.timing.Record`. ``quick``
shrinks every size so the test suite can prove the benchmarks run (it does not
judge their numbers).
"""

from __future__ import annotations

import contextlib
import random
import sys

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.timing import Record, compare, effort

__all__ = ["attention", "recurrent", "optimisers", "bleu", "rouge", "beam_search", "word2vec", "signatures"]


def _seeded(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@contextlib.contextmanager
def _one_thread():
    """Run the block with one torch thread, then restore the previous count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def attention(quick: bool = False) -> list[Record]:
    """Scaled dot-product and multi-head attention, forward and forward + backward, on one thread.

    ``need_weights=False`` is the path held to the goals: its output comes from
    ``F.scaled_dot_product_attention`` itself, after our checks and masking. The
    default path, which also returns the ``(..., T, S)`` weights for plotting, is
    recorded beside it without a goal: a caller that needs the weights cannot use
    the fused kernel, which never stores them. One thread, as ``recurrent``: on a
    shared, loaded machine two threads would time the scheduler more than the code.
    """
    from lib.part4_attention.attention import MultiHeadAttention, scaled_dot_product_attention

    fused_note = "need_weights=False; 1 torch thread"
    weights_note = "need_weights=True: ours also computes and returns the weights; no goal; 1 torch thread"
    records = []
    sizes = [(2, 2, 16, 8)] if quick else [(8, 4, 64, 32), (8, 8, 256, 64), (4, 8, 512, 64)]
    with _one_thread():
        for batch, heads, length, dim in sizes:
            q, k, v = (torch.randn(batch, heads, length, dim, generator=_seeded(i)) for i in range(3))
            size = f"B={batch} H={heads} T=S={length} D={dim}"
            with torch.no_grad():
                records.append(compare(
                    "attention", f"scaled dot-product, forward, {size}",
                    lambda: scaled_dot_product_attention(q, k, v, need_weights=False),
                    lambda: F.scaled_dot_product_attention(q, k, v),
                    "F.scaled_dot_product_attention", goal="<= 1.5", note=fused_note, **effort(quick),
                ))
                records.append(compare(
                    "attention", f"scaled dot-product with weights, forward, {size}",
                    lambda: scaled_dot_product_attention(q, k, v),
                    lambda: F.scaled_dot_product_attention(q, k, v),
                    "F.scaled_dot_product_attention", note=weights_note, **effort(quick),
                ))
            qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

            def backward(fn):
                def run():
                    fn(qg, kg, vg).sum().backward()
                    qg.grad = kg.grad = vg.grad = None
                return run

            records.append(compare(
                "attention", f"scaled dot-product, forward + backward, {size}",
                backward(lambda a, b, c: scaled_dot_product_attention(a, b, c, need_weights=False)[0]),
                backward(F.scaled_dot_product_attention),
                "F.scaled_dot_product_attention", goal="<= 1.5", note=fused_note, **effort(quick),
            ))
            records.append(compare(
                "attention", f"scaled dot-product with weights, forward + backward, {size}",
                backward(lambda a, b, c: scaled_dot_product_attention(a, b, c)[0]),
                backward(F.scaled_dot_product_attention),
                "F.scaled_dot_product_attention", note=weights_note, **effort(quick),
            ))

        for batch, length, embed, heads in ([(2, 8, 16, 2)] if quick else [(8, 64, 128, 4), (8, 128, 256, 8)]):
            theirs = nn.MultiheadAttention(embed, heads, batch_first=True).eval()
            ours = MultiHeadAttention.from_torch(theirs).eval()
            x = torch.randn(batch, length, embed, generator=_seeded(3))
            size = f"B={batch} T={length} E={embed} H={heads}"
            with torch.no_grad():
                records.append(compare(
                    "attention", f"multi-head, forward, {size}",
                    lambda: ours(x, x, x), lambda: theirs(x, x, x),
                    "nn.MultiheadAttention (need_weights=True)", goal="<= 1.5", note="1 torch thread",
                    **effort(quick),
                ))
                records.append(compare(
                    "attention", f"multi-head without weights, forward, {size}",
                    lambda: ours(x, x, x, need_weights=False), lambda: theirs(x, x, x, need_weights=False),
                    "nn.MultiheadAttention (need_weights=False)", goal="<= 1.5", note=fused_note,
                    **effort(quick),
                ))
            xg = x.clone().requires_grad_()

            def mha_backward(module):
                def run():
                    module(xg, xg, xg)[0].sum().backward()
                    module.zero_grad(set_to_none=True)
                    xg.grad = None
                return run

            records.append(compare(
                "attention", f"multi-head, forward + backward, {size}",
                mha_backward(ours), mha_backward(theirs),
                "nn.MultiheadAttention (need_weights=True)", goal="<= 1.5", note="1 torch thread",
                **effort(quick),
            ))
    return records


def recurrent(quick: bool = False) -> list[Record]:
    """Our RNN, GRU and LSTM layers against torch.nn's, with the same weights, on one thread.

    Ours project the whole input sequence in one matrix product before the time loop
    (``lib.part2_recurrent.rnn._Recurrent.forward``); torch.nn runs the loop in one C++ kernel. On the
    CPU, nn.LSTM (not nn.RNN or nn.GRU) hands the whole layer to oneDNN's fused LSTM
    (``aten::mkldnn_rnn_layer``), whose matrix products are faster than the MKL ones
    that ``torch.mm`` calls: on the 2-core machine of the committed results, our LSTM's
    matrix products alone took about twice nn.LSTM's whole forward. One
    thread, as the chapters run these layers (their tensors are small); on a shared,
    loaded machine two threads would time the scheduler more than the code.
    """
    from lib.part2_recurrent.rnn import GRU, LSTM, RNN

    batch, steps, inputs, hidden = (2, 5, 4, 8) if quick else (32, 50, 64, 128)
    size = f"B={batch} T={steps} D={inputs} H={hidden}"
    note = "1 torch thread, as in the chapters"
    records = []
    with _one_thread():
        for ours_class, torch_class in ((RNN, nn.RNN), (GRU, nn.GRU), (LSTM, nn.LSTM)):
            torch.manual_seed(0)
            theirs = torch_class(inputs, hidden, batch_first=True)
            ours = ours_class.from_torch(theirs)
            x = torch.randn(batch, steps, inputs, generator=_seeded(1))
            name = torch_class.__name__
            kernel_note = note + ("; nn.LSTM runs oneDNN's fused LSTM kernel" if torch_class is nn.LSTM else "")
            with torch.no_grad():
                records.append(compare("recurrent", f"{name}, forward, {size}", lambda: ours(x), lambda: theirs(x),
                                       f"nn.{name}", goal="<= 2", note=kernel_note, **effort(quick)))

            def backward(module):
                def run():
                    module(x)[0].sum().backward()
                    module.zero_grad(set_to_none=True)
                return run

            records.append(compare("recurrent", f"{name}, forward + backward, {size}", backward(ours),
                                   backward(theirs), f"nn.{name}", goal="<= 2.5", note=kernel_note, **effort(quick)))
    return records


def optimisers(quick: bool = False) -> list[Record]:
    """One ``step()`` of our optimisers against torch.optim's on the same parameters and gradients."""
    import lib.part1_blocks.optim as ours_optim

    shapes = [(8, 8)] * 2 if quick else [(256, 256)] * 8 + [(256,)] * 8
    settings = {
        "SGD": dict(lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4),
        "Adagrad": dict(lr=0.01),
        "RMSprop": dict(lr=0.01, momentum=0.9, centered=True),
        "Adadelta": dict(lr=1.0),
        "Adam": dict(lr=1e-3, weight_decay=1e-4),
        "AdamW": dict(lr=1e-3, weight_decay=1e-2),
        "NAdam": dict(lr=1e-3),
    }
    records = []
    for name, hyper in settings.items():
        generator = _seeded(2)
        params = {side: [torch.randn(shape, generator=_seeded(i)).requires_grad_() for i, shape in enumerate(shapes)]
                  for side in ("ours", "theirs")}
        for side in params:
            for p in params[side]:
                p.grad = torch.randn(p.shape, generator=generator)
        ours = getattr(ours_optim, name)(params["ours"], **hyper)
        theirs = getattr(torch.optim, name)(params["theirs"], **hyper)
        records.append(compare(
            "optimisers", f"{name} step, {len(shapes)} tensors, {sum(torch.Size(s).numel() for s in shapes):,} numbers",
            ours.step, theirs.step, f"torch.optim.{name} (default foreach)", **effort(quick),
        ))
    return records


def _sentences(count: int, seed: int) -> tuple[list[list[str]], list[list[list[str]]]]:
    """Hypotheses that are noisy copies of their references, over a Zipf-like vocabulary."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(2000)]
    weights = [1 / (rank + 1) for rank in range(len(words))]
    hypotheses, references = [], []
    for _ in range(count):
        reference = rng.choices(words, weights, k=rng.randint(8, 30))
        hypothesis = [w if rng.random() < 0.7 else rng.choices(words, weights)[0] for w in reference]
        del hypothesis[rng.randrange(len(hypothesis))]
        hypotheses.append(hypothesis)
        references.append([reference])
    return hypotheses, references


def bleu(quick: bool = False) -> list[Record]:
    """Corpus BLEU against sacreBLEU on the same tokens (``tokenize="none"``)."""
    from sacrebleu.metrics import BLEU

    from lib.part3_words.metrics import corpus_bleu

    count = 200 if quick else 10_000
    hypotheses, references = _sentences(count, seed=0)
    joined_hypotheses = [" ".join(h) for h in hypotheses]
    joined_references = [[" ".join(refs[0]) for refs in references]]
    scorer = BLEU(tokenize="none")
    ours = corpus_bleu(hypotheses, references).score * 100
    theirs = scorer.corpus_score(joined_hypotheses, joined_references).score
    if abs(ours - theirs) > 1e-9:
        raise RuntimeError(f"corpus_bleu {ours} differs from sacreBLEU's {theirs}")
    return [compare(
        "metrics", f"corpus BLEU, {count:,} sentence pairs",
        lambda: corpus_bleu(hypotheses, references),
        lambda: scorer.corpus_score(joined_hypotheses, joined_references),
        "sacrebleu.BLEU(tokenize='none')", goal="<= 1", **effort(quick, repeats=5),
        note=f"same score {ours:.4f}",
    )]


class _WhitespaceTokenizer:
    """Gives rouge-score our tokens unchanged."""

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return text.split()


def rouge(quick: bool = False) -> list[Record]:
    """ROUGE-1 and ROUGE-2 precision/recall/F against rouge-score on the same tokens."""
    from rouge_score import rouge_scorer

    from lib.part3_words.metrics import rouge_n_scores

    count = 200 if quick else 10_000
    hypotheses, references = _sentences(count, seed=1)
    pairs = [(h, refs[0], " ".join(h), " ".join(refs[0])) for h, refs in zip(hypotheses, references)]
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2"], tokenizer=_WhitespaceTokenizer())

    def ours():
        return [(rouge_n_scores(h, r, 1), rouge_n_scores(h, r, 2)) for h, r, _, _ in pairs]

    def theirs():
        return [scorer.score(r, h) for _, _, h, r in pairs]

    for (one, two), score in zip(ours()[:50], theirs()[:50]):
        if abs(one.fmeasure - score["rouge1"].fmeasure) > 1e-12 or abs(two.fmeasure - score["rouge2"].fmeasure) > 1e-12:
            raise RuntimeError("rouge_n_scores differs from rouge-score")
    return [compare("metrics", f"ROUGE-1 and ROUGE-2, {count:,} sentence pairs", ours, theirs,
                    "rouge_score.RougeScorer", **effort(quick, repeats=5))]


def beam_search(quick: bool = False) -> list[Record]:
    """Batched beam search (one model call per step) against one sentence at a time."""
    from lib.part3_words.decoding import beam_search_batch
    from lib.part4_attention.reversal_task import ReversalTask
    from lib.part4_attention.transformer import Seq2SeqTransformer, TransformerConfig

    task = ReversalTask()
    count = 4 if quick else 64
    _, data = task.split(1, count, seed=0)
    torch.manual_seed(0)
    model = Seq2SeqTransformer(task.vocab_size, task.vocab_size, TransformerConfig(d_model=32, num_heads=2, d_ff=64)).eval()
    beam, max_len = 4, task.max_len + 1

    def batched():
        step = model.step_fn(data.src, data.src_lens)
        return beam_search_batch(step, count, task.bos, task.eos, beam, max_len)

    def one_at_a_time():
        results = []
        for s in range(count):
            step = model.step_fn(data.src[s:s + 1], data.src_lens[s:s + 1])
            results.extend(beam_search_batch(step, 1, task.bos, task.eos, beam, max_len))
        return results

    # Batching changes the order of floating-point sums, so scores may differ in the last bits.
    together, alone = batched(), one_at_a_time()
    same_tokens = [[t for t, _ in h] for h in together] == [[t for t, _ in h] for h in alone]
    scores_close = all(abs(a - b) <= 1e-5 for ha, hb in zip(together, alone) for (_, a), (_, b) in zip(ha, hb))
    if not (same_tokens and scores_close):
        raise RuntimeError("batched beam search differs from one sentence at a time")
    return [compare(
        "decoding", f"beam search, {count} sources, beam {beam}, Transformer d=32",
        batched, one_at_a_time, "the same search one sentence at a time", goal=">= 5", speedup=True,
        note="identical hypotheses; scores equal to 1e-5", **effort(quick, repeats=3),
    )]


def word2vec(quick: bool = False) -> list[Record]:
    """Our word2vec against gensim's (one worker each): training time and WordSim-353 correlation.

    The corpus is gensim's stemmed Wikipedia sample (chapter 5's), with larger vectors and twice
    the epochs of the chapter; the evaluation words go through the same Porter stemmer.
    """
    from gensim.parsing.porter import PorterStemmer

    from lib.corpus import Vocabulary, gensim_data, read_sentences
    from lib.part3_words.embeddings import read_word_pairs
    from lib.part3_words.word2vec import Word2VecConfig, train_gensim, train_word2vec

    with _one_thread():  # gensim gets one worker
        sentences = read_sentences(gensim_data("head500.noblanks.cor"), max_sentences=20 if quick else None)
        min_count = 5
        vocab = Vocabulary.from_sentences(sentences, min_count=min_count)
        pairs = read_word_pairs(gensim_data("wordsim353.tsv"), normalise=PorterStemmer().stem)
        base = dict(vector_size=100, window=5, negative=5, sample=1e-3, epochs=1 if quick else 10, seed=1)
        records = []
        for name, config in (("skip-gram", Word2VecConfig(architecture="skip-gram", alpha=0.025, **base)),
                             ("CBOW", Word2VecConfig(architecture="cbow", alpha=0.05, **base))):
            trained = {}

            def ours():
                trained["ours"] = train_word2vec(sentences, vocab, config)[0].word_vectors()

            def theirs():
                trained["gensim"] = train_gensim(sentences, vocab, config, min_count=min_count)[0]

            record = compare(
                "word2vec", f"{name} + negative sampling, {sum(map(len, sentences)):,} words, "
                f"{config.epochs} epochs, D={config.vector_size}",
                ours, theirs, "gensim Word2Vec (workers=1)", goal="<= 3",
                **effort(quick, repeats=3),
            )
            ours_rho = trained["ours"].evaluate_word_pairs(pairs).spearman
            gensim_rho = trained["gensim"].evaluate_word_pairs(pairs).spearman
            record.note = f"WordSim-353 Spearman: ours {ours_rho:.3f}, gensim {gensim_rho:.3f}"
            if not quick and ours_rho < gensim_rho - 0.05:
                record.met = False
                record.note += " (ours more than 0.05 worse)"
            records.append(record)
        return records


def _unchecked(module: str):
    """A second copy of lib module ``module``, loaded from its file outside the import hook:
    the same code, with no call checked (its calls to its own helpers included)."""
    import importlib.util
    import sys

    origin = importlib.util.find_spec(module).origin
    spec = importlib.util.spec_from_file_location(f"unchecked_{module.replace('.', '_')}", origin)
    copy = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = copy  # dataclasses look their module up while it is being made
    spec.loader.exec_module(copy)
    return copy


def signatures(quick: bool = False) -> list[Record]:
    """What checking a call against its signature costs (lib/checked.py): a function of a
    checked module against the same function of a copy of the module that the import hook
    did not touch.

    No goal: the check costs a fixed time per call (and per call of a checked helper), so it
    matters only for a small function called many times. The layers are timed too: one
    multi-head attention (its own checked calls) and a recurrent network's forward pass, which
    calls its checked cell once per time step.
    """
    import lib.part1_blocks.activations
    import lib.part4_attention.attention
    import lib.part1_blocks.losses
    import lib.part2_recurrent.rnn

    names = ("lib.part1_blocks.activations", "lib.part1_blocks.losses", "lib.part4_attention.attention", "lib.part2_recurrent.rnn")
    plain = {name: _unchecked(name) for name in names}
    records = []
    generator = _seeded()
    sizes = [4] if quick else [64, 65536]
    with _one_thread():
        for n in sizes:
            x = torch.randn(n, generator=generator)
            logits = torch.randn(max(n // 16, 1), 16, generator=generator)
            targets = torch.randint(16, (logits.shape[0],), generator=generator)
            units = torch.relu(torch.randn(max(n // 64, 1), 64, generator=generator))
            for module, name, args in (
                (lib.part1_blocks.activations, "sigmoid", (x,)), (lib.part1_blocks.activations, "gelu", (x,)),
                (lib.part1_blocks.losses, "cross_entropy", (logits, targets)), (lib.part1_blocks.activations, "dead_units", (units,)),
            ):
                checked, unchecked = getattr(module, name), getattr(plain[module.__name__], name)
                records.append(compare(
                    "signatures", f"{name}, {n:,} values", lambda f=checked, a=args: f(*a),
                    lambda f=unchecked, a=args: f(*a), "the same code, unchecked",
                ))
        batch, steps, width = (2, 4, 8) if quick else (8, 32, 64)
        sequence = torch.randn(batch, steps, width, generator=generator)
        for module, build, call, label in (
            ("lib.part4_attention.attention", lambda m: m.MultiHeadAttention(width, 4),
             lambda layer: layer(sequence, sequence, sequence), "MultiHeadAttention"),
            ("lib.part2_recurrent.rnn", lambda m: m.RNN(width, width),
             lambda layer: layer(sequence), f"RNN forward, {steps} steps"),
        ):
            torch.manual_seed(0)
            checked = build(sys.modules[module]).eval()
            torch.manual_seed(0)
            unchecked = build(plain[module]).eval()
            with torch.no_grad():
                records.append(compare(
                    "signatures", f"{label}, ({batch}, {steps}, {width})",
                    lambda layer=checked: call(layer), lambda layer=unchecked: call(layer),
                    "the same code, unchecked",
                ))
    return records
