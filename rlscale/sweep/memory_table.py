"""``rlscale sweep --dry-run``'s memory table: each distinct job of the sweep's runs with its estimated memory
per trainer GPU and per generator GPU (``rlscale.engines.memory``), so a job is sized before it is submitted.
Variants of one model shape, one job layout and one ``engine.activation_checkpointing`` share a row; with
``auto`` (resolved on the card the job gets) the row gives the estimate without checkpointing, the card size
below which auto turns it on, and the estimate with it. The last column gives the rows each generator samples at
once (``engine.generator_rows``): all of a chunk, a set number refilled as traces end, or for ``auto`` the card size
from which every row fits (on a smaller card, the most rows that fit)."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple, Union

from rich.table import Table

from rlscale.config import typed
from dataclasses import replace

from rlscale.engines.memory import GIB, USABLE_FRACTION, JobLayout, MemoryEstimate, ModelShape
from rlscale.runfolder.names import shown
from rlscale.sweep.resolve import ResolvedRun
from rlscale.tables import WrappingTable

PARTS = ("weights", "whole_weights", "optimizer", "activations", "lm_head", "generator_weights", "decoder_copies",
         "published_weights", "kv_cache")


def memory_table(runs: Sequence[ResolvedRun], prompt_tokens: int) -> Table:
    from rlscale.engines.models.shape import model_shape

    shapes: Dict[str, Union[ModelShape, str]] = {}
    rows: Dict[Tuple[object, ...], List[str]] = {}
    for r in runs:
        cfg = typed(r.cfg)
        key = repr(cfg.model)
        if key not in shapes:
            try:
                shapes[key] = model_shape(cfg.model)
            except (ValueError, OSError) as err:
                shapes[key] = f"no estimate: {err}"
        try:
            layout: Union[JobLayout, str] = JobLayout.of(cfg, prompt_tokens)
        except ValueError as err:
            layout = f"no estimate: {err}"
        names = rows.setdefault((shapes[key], layout, cfg.engine.activation_checkpointing == "auto"), [])
        names += [] if r.run.variant in names else [r.run.variant]
    table = WrappingTable(title=f"memory per GPU, estimated (prompts of {prompt_tokens} tokens; rlscale.engines.memory)")
    for column in ("variants", "params", "trainer ranks", "sequence", "activation checkpointing",
                   "per trainer GPU (rank 0)", "per generator GPU", "generator rows"):
        table.add_column(column, overflow="fold")
    for (shape, layout, auto), names in rows.items():
        if isinstance(shape, str) or isinstance(layout, str):
            table.add_row(shown(", ".join(names)), shown(shape if isinstance(shape, str) else layout), "", "", "", "",
                          "", "")
            continue
        estimate = MemoryEstimate.of(shape, layout)
        learner = f"{layout.learner} ZeRO-{layout.zero_stage}" if layout.learner == "deepspeed" else layout.learner
        generator = "" if estimate.generator is None else _gib(estimate.generator)
        table.add_row(shown(", ".join(names)), _count(shape.params), f"{layout.ranks} ({learner})",
                      str(layout.sequence), _checkpointing(shape, layout, auto), _gib(estimate.trainer), generator,
                      _rows(estimate, layout))
    return table


def _rows(estimate: MemoryEstimate, layout: JobLayout) -> str:
    """The rows a generator samples at once (``rlscale.engines.memory.generator_rows``)."""
    chunk = layout.chunk_rows
    if layout.generator_rows is None:
        card = sum((estimate.generator or estimate.trainer).values()) / GIB / USABLE_FRACTION
        return f"auto: all {chunk} from {card:.3g} GiB cards"
    if layout.cache_rows < chunk:
        return f"{layout.cache_rows} of {chunk}, refilled"
    return f"all {chunk}"


def _checkpointing(shape: ModelShape, layout: JobLayout, auto: bool) -> str:
    """on, off, or for auto the card size below which it turns on (``rlscale.engines.memory.checkpointing_needed``)
    and the trainer GPU's estimate then."""
    if not auto:
        return "on" if layout.checkpointing else "off"
    card = MemoryEstimate.of(shape, layout).trainer_gib / USABLE_FRACTION
    on = MemoryEstimate.of(shape, replace(layout, checkpointing=True)).trainer_gib
    return f"auto: on for cards under {card:.3g} GiB, then {on:.3g} GiB per trainer GPU"


def _count(params: int) -> str:
    """3 significant digits with a unit: 354K, 135M, 8.19B."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if params >= scale:
            return f"{params / scale:.3g}{unit}"
    return str(params)


def _gib(parts: Dict[str, float]) -> str:
    detail = ", ".join(f"{name} {parts[name] / GIB:.3g}" for name in PARTS if name in parts)
    return f"{sum(parts.values()) / GIB:.3g} GiB ({detail})"
