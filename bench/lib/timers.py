"""Timers: wall seconds of a host call between device synchronisations, CUDA-event microseconds of eager
calls and of graph replays, the device-to-device copy bandwidth."""
from __future__ import annotations

import gc
import time
from typing import Callable

import torch


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device):
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - start


def release(device: torch.device) -> None:
    """Free what the finished measurement left (its models, caches, graphs) before the next one."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def time_eager(call: Callable[[int], torch.Tensor], layers: int, reps: int = 30) -> float:
    """us per call of back-to-back calls cycling through the layers."""
    for i in range(layers):
        call(i)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        for i in range(layers):
            call(i)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / (reps * layers)


def time_graph(call: Callable[[int], torch.Tensor], layers: int, reps: int = 30) -> float:
    """us per call of a CUDA graph holding one call per layer (warmed up on a side stream, as captures are)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(layers):
            call(i)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(layers):
            call(i)
    for _ in range(3):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / (reps * layers)


def copy_tbps(device: torch.device, gib: int = 1) -> float:
    """TB/s of a device-to-device copy of ``gib`` GiB (bytes read + written)."""
    a = torch.empty(gib << 30, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    us = time_eager(lambda i: b.copy_(a), layers=1, reps=20)
    return 2 * a.numel() / us / 1e6


def tbps(nbytes: int, us: float) -> float:
    return nbytes / us / 1e6
