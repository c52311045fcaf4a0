"""Data parallelism on one machine: one training process per core group, gradients averaged.

A model of a few million parameters has matmuls too small for many threads to share well, and a
step has serial stretches (building the rows, Python between kernels) where one process of two
threads leaves a core waiting. Processes of one thread each keep their own core busy instead: on
the 2-core development machine, two of them trained 1,137 tokens/s against 1,086 for one process
of two threads (`benchmarks/training_throughput.py`, same run), which is little; more cores should
gain more. Each process (a rank) builds and trains its share of every step's rows, and the ranks
average their gradients over gloo on the loopback interface before every rank takes the same
optimizer step, so their weights stay identical and the run is the one-process run's with the
same batch. Each rank holds its own copy of the corpus: about 5-7 GB of memory at the corpus's
full size.

Rank 0 is the process the user started: it alone writes the log, the checkpoints, the export and
the resume state, runs validation and listens for Ctrl-C or SIGTERM. Every step ends with one small
collective in which the ranks agree whether to stop (rank 0's time limit or signal) and add up the
tokens they processed, so all ranks leave the loop after the same step. The other ranks ignore
the signals a terminal sends to the whole process group and die with rank 0 (`PR_SET_PDEATHSIG`),
so a killed run leaves no process behind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# A collective that waits longer than this means a rank died: the others give up instead of hanging.
TIMEOUT = timedelta(minutes=10)


@dataclass(frozen=True)
class Ranks:
    """This process's place among the training processes (rank 0 of 1: no parallelism)."""

    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def share(self, rows: int) -> slice:
        """This rank's rows of a step's batch: every `world`-th row from `rank`."""
        if rows < self.world:
            raise ValueError(f"a batch of {rows} rows cannot be shared by {self.world} processes")
        return slice(self.rank, None, self.world)

    def noise_seed(self, seed: int) -> int:
        """The noise generator's seed for this rank's rows (the one-process seed on rank 0 of 1)."""
        return seed * self.world + self.rank

    def average_gradients(self, model: torch.nn.Module) -> None:
        """Every rank's gradients replaced by their mean over the ranks.

        A parameter no token reached on one rank (an expert no token was routed to) has no gradient
        there; it counts as zero so that every rank reduces the same tensors, and a parameter no
        rank reached keeps no gradient, as in one process (AdamW then leaves it alone)."""
        if self.world == 1:
            return
        params = [p for p in model.parameters() if p.requires_grad]
        reached = torch.tensor([float(p.grad is not None) for p in params])
        dist.all_reduce(reached, op=dist.ReduceOp.MAX)
        params = [p for p, r in zip(params, reached.tolist()) if r > 0]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.flatten() for p in params])
        dist.all_reduce(flat)
        flat /= self.world
        offset = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[offset : offset + n].view_as(p))
            offset += n

    def agree(self, stop: bool, tokens: int, loss_tokens: int, clock: float) -> tuple[bool, int, int, float]:
        """What the ranks share after a step: whether any rank stops, the tokens and diffusion-loss
        tokens of all ranks, and rank 0's `clock` (the piece's seconds, which set the learning
        rate: each rank's own clock would give each a slightly different one, and their weights
        would drift apart)."""
        if self.world == 1:
            return stop, tokens, loss_tokens, clock
        mine = clock if self.main else 0.0
        t = torch.tensor([float(stop), float(tokens), float(loss_tokens), mine], dtype=torch.float64)
        dist.all_reduce(t)
        return bool(t[0] > 0), int(t[1]), int(t[2]), float(t[3])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join_group(ranks: Ranks, port: int) -> None:
    """Join the gloo group of `ranks.world` processes on 127.0.0.1:`port` (nothing leaves the machine)."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=ranks.rank,
                            world_size=ranks.world, timeout=TIMEOUT)


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (elsewhere the group timeout ends it)."""
    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        ctypes.CDLL(name).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker(run: Callable, args, rank: int, world: int, port: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    ranks = Ranks(rank, world)
    join_group(ranks, port)
    try:
        run(args, ranks)
    finally:
        dist.destroy_process_group()


def launch(run: Callable, args, world: int) -> object:
    """`run(args, ranks)` on `world` processes: ranks 1.. are spawned, rank 0 is this process.

    Returns rank 0's result; raises if another rank failed. `run` must be a module-level function
    (the spawned processes import it) and `args` picklable."""
    if world == 1:
        return run(args, Ranks())
    port = free_port()
    ctx = mp.get_context("spawn")
    others = [ctx.Process(target=_worker, args=(run, args, r, world, port), daemon=True) for r in range(1, world)]
    for p in others:
        p.start()
    ranks = Ranks(0, world)
    join_group(ranks, port)
    try:
        result = run(args, ranks)
    finally:
        dist.destroy_process_group()
        for p in others:
            p.join(timeout=60)
    failed = [p.exitcode for p in others if p.exitcode not in (0, None)]
    if failed:
        raise RuntimeError(f"a training process exited with code {failed[0]}")
    return result


def threads_per_rank(world: int, requested: int | None = None) -> int:
    """Threads for each rank: the requested number, or this machine's cores shared out."""
    if requested:
        return requested
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // world)
