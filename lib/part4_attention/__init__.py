"""Part IV, attention: chapter 9's attention (:mod:`.attention`); chapter 10's
sequence-to-sequence models (:mod:`.seq2seq`, :mod:`.pointer`), trained on source and
target pairs (:mod:`.pairs`) of the date, sorting and reversal tasks
(:mod:`.date_task`, :mod:`.sorting_task`, :mod:`.reversal_task`); chapter 11's
Transformer (:mod:`.positional`, :mod:`.transformer_blocks`, :mod:`.transformer`,
:mod:`.transformer_recipe`) and pretraining (:mod:`.pretrained`,
:mod:`.pretraining`)."""
