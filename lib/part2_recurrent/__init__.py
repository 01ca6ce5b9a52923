"""Part II, recurrent networks: chapter 3's recurrent layer and back-propagation through
time (:mod:`.rnn`) and character language model (:mod:`.char_lm`); chapter 4's gated
layers (:mod:`.gating`) and the recall task they are tested on (:mod:`.recall_task`)."""
