"""The shape of the run's policy without its weights (``rlscale.engines.memory``): the tiny model's config,
or a checkpoint's ``config.json`` (or GGUF header) as transformers reads it, offline."""
from __future__ import annotations

from rlscale.engines.models.configs import ModelConfig
from rlscale.engines.memory import ModelShape
from rlscale.engines.models.char_tokenizer import CharTokenizer


def model_shape(cfg: ModelConfig) -> ModelShape:
    """The policy's shape; a checkpoint that cannot be read raises (ValueError, OSError) naming it."""
    if cfg.name == "tiny":
        from rlscale.engines.models.tiny_model import tiny_llama_config

        return ModelShape.of_config(tiny_llama_config(cfg, CharTokenizer(interruption_phrase="").vocab_size))
    if cfg.name != "hf":
        raise ValueError(f"model.name='{cfg.name}': no shape to estimate memory from (tiny and hf have one)")
    from transformers import AutoConfig

    from rlscale.engines.models.hf_model import resolve_checkpoint

    ckpt = resolve_checkpoint(cfg)
    return ModelShape.of_config(AutoConfig.from_pretrained(ckpt.directory, gguf_file=ckpt.gguf_file,
                                                           local_files_only=True))
