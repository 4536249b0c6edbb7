"""What every layer above shares: the data that crosses module boundaries (``rlscale.core.types``) and
the interfaces of the generator, the learner and the tokenizer (``rlscale.core.protocols``)."""
