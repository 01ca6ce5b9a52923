"""Part I, building blocks: chapter 1's activations (:mod:`.activations`) and losses
(:mod:`.losses`); chapter 2's optimisers (:mod:`.optim`) and learning-rate schedules
(:mod:`.schedules`)."""
