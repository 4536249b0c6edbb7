"""The two off-policy sources of training batches (Section 3.1): PPO-off-policy-k (``ppo``, with the weights
it keeps, ``kept_policy``) and PipelineRL-k (``pipeline``, its generator processes ``pipeline_workers`` and
weight hand-off ``pipeline_weights``)."""
