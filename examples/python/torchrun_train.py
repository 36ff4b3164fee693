"""Training under torchrun, the embedding table on ferry.ps shard servers
that the trainers find through torch.distributed's store.

    # on the shards' host (its ferryd runs with --listen HOST:PORT):
    python3 -m ferry.ps.server --tables @tables.json --shard 0/2 --store MASTER:29500
    python3 -m ferry.ps.server --tables @tables.json --shard 1/2 --store MASTER:29500
    # the trainers (torch 1.13 spells it --nproc_per_node, --master_addr, --master_port):
    torchrun --nproc-per-node 2 --master-addr MASTER --master-port 29500 \\
        examples/python/torchrun_train.py --tables tables.json

``--write-tables FILE`` writes the tables this script trains (the shard
servers' --tables). Each trainer: ``init_process_group("gloo")`` (the dense
head's gradients are averaged by DistributedDataParallel), then
``ferry.ps.Worker.from_env(tables)``; the embedding bag pulls its rows from
the shards and pushes their gradients there. Every rank prints ``rank R
step S loss L``; rank 0 prints ``final loss L`` (the mean of the last 20
steps over every rank) and, with ``--json``, one JSON line.

Checkpoints: ``--save FILE`` has rank 0 write, after the last step, the
model's state dict (the table as ``bag.weight``, pulled from the shards),
the head's optimizer and the shards' Adagrad state
(``ferry.ps.torch.optimizer_state_dict``); ``--resume FILE`` starts from
one: every rank loads the head, rank 0 gives the table and its optimizer
state to the shards, and the others wait for it before their first step.

With ``--save-shards NAME`` beside ``--save``, the table stays on the
shards: rank 0 has each shard write its part into its own
``--checkpoint-dir`` (``ferry.ps.save_shards``) and FILE holds only the
head, its optimizer and NAME. Resume by starting the shards with
``--checkpoint-dir DIR --restore NAME`` and the trainers with ``--resume
FILE``: nothing of the table passes through a trainer either way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List

import torch
import torch.distributed as dist

import ferry.ps as ps
from ferry.ps.torch import EmbeddingBag, load_optimizer_state_dict, optimizer_state_dict

ROWS, DIM = 50_000, 16


def tables() -> List[ps.Table]:
    return [ps.Embedding("emb", rows=ROWS, dim=DIM, optimizer=ps.Adagrad(lr=0.3), init=ps.Uniform(0.05, seed=5))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", default=None, help="the shards' --tables file (default: this script's tables)")
    ap.add_argument("--write-tables", default=None, help="write this script's tables as JSON to FILE and exit")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--save", default=None, help="rank 0 writes a checkpoint to FILE after the last step")
    ap.add_argument("--resume", default=None, help="start from the checkpoint in FILE")
    ap.add_argument("--save-shards", default=None, metavar="NAME",
                    help="with --save: the shards save the table as NAME in their --checkpoint-dir")
    a = ap.parse_args()
    if a.write_tables:
        with open(a.write_tables, "w") as f:
            json.dump([t.to_dict() for t in tables()], f)
        return 0
    t = tables()
    if a.tables:
        with open(a.tables) as f:
            t = [ps.Table.from_dict(d) for d in json.load(f)]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # before from_env: the store is then this job's
    rank, world = dist.get_rank(), dist.get_world_size()
    worker = ps.Worker.from_env(t)
    torch.manual_seed(1)
    model = torch.nn.ModuleDict({"bag": EmbeddingBag(worker, "emb", mode="sum"), "head": torch.nn.Linear(DIM, 1)})
    bag = model["bag"]
    opt_state = None
    if a.save_shards and not a.save:
        ap.error("--save-shards NAME goes with --save FILE (the head and its optimizer)")
    if a.resume:
        saved = torch.load(a.resume)
        model["head"].load_state_dict({k[5:]: v for k, v in saved["model"].items() if k.startswith("head.")})
        if "shards" in saved:  # the shards started from their own checkpoint (--restore)
            if rank == 0:
                print("table from the shards' checkpoint %s" % saved["shards"], flush=True)
        elif rank == 0:  # one rank gives the shards the table and its optimizer state
            model.load_state_dict(saved["model"])
            load_optimizer_state_dict(model, saved["ps"])
        opt_state = saved["opt"]
        dist.barrier()  # no rank trains before the shards hold the checkpoint
    head = torch.nn.parallel.DistributedDataParallel(model["head"])
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    if opt_state is not None:
        opt.load_state_dict(opt_state)
    gen = torch.Generator().manual_seed(100 + rank)
    losses = []
    for step in range(a.steps):
        ids = torch.randint(0, 2000, (a.batch, 4), generator=gen)
        y = ((ids % 2).sum(1) >= 2).float()  # a label the embeddings can learn
        loss = torch.nn.functional.binary_cross_entropy_with_logits(head(bag(ids)).squeeze(1), y)
        opt.zero_grad()
        loss.backward()  # the rows' gradients go to the shards; the head's are all-reduced
        opt.step()
        worker.synchronize()
        losses.append(loss.item())
        if step % 50 == 0 or step == a.steps - 1:
            print("rank %d step %d loss %.4f" % (rank, step, losses[-1]), flush=True)
    tail = torch.tensor([sum(losses[-20:]) / len(losses[-20:]), sum(losses[:20]) / len(losses[:20])])
    dist.all_reduce(tail)
    tail /= world
    if rank == 0:
        print("final loss %.4f (first steps %.4f), %d ranks" % (tail[0].item(), tail[1].item(), world), flush=True)
        if a.json:
            print(json.dumps({"ranks": world, "final_loss": tail[0].item(), "first_loss": tail[1].item(),
                              "steps": a.steps, "shards": worker.shards}), flush=True)
    dist.barrier()  # every rank's pushes are applied
    if a.save and rank == 0 and a.save_shards:
        rows = ps.save_shards(worker, a.save_shards)
        torch.save({"model": {"head." + k: v for k, v in model["head"].state_dict().items()},
                    "opt": opt.state_dict(), "shards": a.save_shards}, a.save)
        print("saved %s; the shards saved %s (rows per shard: %s)" % (a.save, a.save_shards, rows), flush=True)
    elif a.save and rank == 0:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "ps": optimizer_state_dict(model)}, a.save)
        print("saved %s" % a.save, flush=True)
    dist.barrier()
    worker.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
