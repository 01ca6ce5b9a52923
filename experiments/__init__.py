"""The chapters' experiments: seed sweeps, ablations, training runs and the findings
the text draws from them (:mod:`experiments.findings`), one module per chapter
(``ch10_seq2seq`` runs chapter 10's). They use :mod:`lib`, the concepts, and are not
part of it: a reader who installs lib to reuse attention does not get the book's
training runs."""
