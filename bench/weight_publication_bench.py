#!/usr/bin/env python
"""What a weight publication costs the trainer (``weight_sync_s``, Section 3.1: "new weights are pushed to the
generators as soon as an update finishes"), on CPU: generator processes beside the trainer take the weights
through shared memory (``SharedWeights.publish``, the baseline), generator tasks through a Gloo broadcast from
rank 0 (``RemoteGeneratorPool.publish``, rlscale.train.offpolicy.pipeline_remote) over localhost TCP, as they
would from another node.

For each model (the embedded tiny Llama's shape and SmolLM2-135M's, float32, random weights; a tied embedding is
copied twice into shared memory and broadcast once), the median over
``--repeats`` publications of the trainer's seconds, with 1 and 2 generator tasks receiving (each a process that
joins every publication as a generator does between decode steps). Ends with the ratio of each broadcast to the
shared-memory copy of the same weights.

Usage: ``python bench/weight_publication_bench.py [--repeats N] [--out FILE.md]``;
``python bench/weight_publication_bench.py --tiny --repeats 2`` (seconds) measures the tiny model alone.
"""
from __future__ import annotations

import argparse
import copy
import socket
import statistics
import threading
import time
from pathlib import Path
from typing import Dict, List

import torch
import torch.multiprocessing as mp
from transformers import LlamaConfig, LlamaForCausalLM

from rlscale.train.offpolicy.pipeline_remote import (RemoteGeneratorPool, RemoteReplica, StoreAddress, beat_until,
                                                     distinct_keys, weight_group)
from rlscale.train.offpolicy.pipeline_weights import SharedWeights

SHAPES: Dict[str, dict] = {  # LlamaConfig fields
    "tiny (embedded default)": dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=4, vocab_size=64),
    "SmolLM2-135M": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True),
}


def build(shape: dict) -> torch.nn.Module:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**shape)).float().eval()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def receiver(shape: dict, port: int, index: int, count: int) -> None:
    """A generator task's side of the publications: join each as it is announced, until the pool closes."""
    address = StoreAddress("127.0.0.1", port)
    store = address.connect(leader=False)
    threading.Thread(target=beat_until, args=(address, index, threading.Event()), daemon=True).start()
    group = weight_group(store, index + 1, count + 1, torch.device("cpu"))
    replica = RemoteReplica(build(shape), store, group, int(store.get("slots")))
    while not store.check(["closed"]):
        replica.sync()
        time.sleep(0.001)
    store.add("left", 1)


def shared_memory_seconds(model: torch.nn.Module, repeats: int) -> List[float]:
    shared = SharedWeights(model, mp.get_context("forkserver"))
    weights = model.state_dict()
    return [shared.publish(weights, version, lambda: None) for version in range(repeats)]


def broadcast_seconds(shape: dict, model: torch.nn.Module, receivers: int, repeats: int) -> List[float]:
    port = free_port()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=receiver, args=(shape, port, i, receivers), daemon=True) for i in range(receivers)]
    for proc in procs:
        proc.start()
    pool = RemoteGeneratorPool(receivers, model, slots=1, queue_size=4, address=StoreAddress("127.0.0.1", port))
    weights = model.state_dict()
    seconds = [pool.publish(weights, version) for version in range(repeats)]
    pool.close()
    for proc in procs:
        proc.join(30)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tiny", action="store_true", help="the embedded tiny Llama's shape only")
    args = parser.parse_args()
    rows = ["| model | parameters | MB (float32) | shared memory s | broadcast, 1 task s | broadcast, 2 tasks s | "
            "1 task / shared | 2 tasks / shared |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, shape in list(SHAPES.items())[:1 if args.tiny else None]:
        model = build(shape)
        state = model.state_dict()
        params = sum(state[key].numel() for key in distinct_keys(state))  # what a broadcast carries
        print(f"{name}: {params / 1e6:.1f} M parameters", flush=True)
        base = statistics.median(shared_memory_seconds(copy.deepcopy(model), args.repeats))
        one = statistics.median(broadcast_seconds(shape, model, 1, args.repeats))
        two = statistics.median(broadcast_seconds(shape, model, 2, args.repeats))
        rows.append(f"| {name} | {params / 1e6:.2f} M | {4 * params / 1e6:.1f} | {base:.4f} | {one:.4f} | {two:.4f} | "
                    f"{one / base:.1f}x | {two / base:.1f}x |")
        print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
