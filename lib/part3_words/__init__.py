"""Part III, words and sequences: chapter 5's word2vec (:mod:`.word2vec`, the Huffman
tree of :mod:`.tree_softmax`, evaluation in :mod:`.embeddings`); chapter 6's language
models (:mod:`.ngram`, :mod:`.lm`, :mod:`.softmax_approx`, :mod:`.reinforce`);
chapter 7's decoding (:mod:`.decoding`); chapter 8's BLEU and ROUGE
(:mod:`.metrics`)."""
