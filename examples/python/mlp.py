#!/usr/bin/env python3
"""An MLP (784-256-128-10, ``--hidden`` for others) on Fashion-MNIST, data parallel with PyTorch
DDP, with a choice of communication hook: DDP's own allreduce, fp16 compression, PowerSGD, or
dct (synchronous, or overlapped with the backward with ``--overlap``); ``--hook local``
communicates nothing (each rank keeps its own gradients: the backward's time without any
exchange, a baseline for the overlap, not a way to train).

    mpiexec -n 2 python3 examples/python/mlp.py --hook dct --density 0.0125 --momentum 0.9

Every hook gets the same seed, initial weights and data order. Per epoch, rank 0 prints the
test accuracy, the bytes each rank sent against DDP's dense allreduce (logical ring bytes,
2(P-1)/P of the payload, as dct's statuses count them) and the mean step time. ``--json FILE``
writes the same figures. With ``--hook dct`` the momentum is dct's momentum correction and the
optimizer is plain SGD; with the other hooks it is SGD's own momentum.
"""

import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

import dct
import dct.torch


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, split, limit):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / 255.0)
    return x, torch.from_numpy(labels.astype(np.int64))


class CountingAllreduce:
    """Counts the bytes the fp16 and PowerSGD hooks give to torch.distributed.all_reduce."""

    def __init__(self, size):
        self.factor = 2.0 * (size - 1) / size
        self.bytes = 0.0
        self._all_reduce = dist.all_reduce
        dist.all_reduce = self

    def __call__(self, tensor, *args, **kwargs):
        self.bytes += self.factor * tensor.numel() * tensor.element_size()
        return self._all_reduce(tensor, *args, **kwargs)


def local_hook(_, bucket):
    """No communication: the bucket's own gradients, at once."""
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hook", choices=["none", "fp16", "powersgd", "dct", "local"],
                        default="dct")
    parser.add_argument("--hidden", default="256,128", help="hidden layers' widths")
    parser.add_argument("--overlap", action="store_true",
                        help="dct: the calls on a worker thread, beside the backward")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--density", type=float, default=0.0125, help="dct: dct_density")
    parser.add_argument("--values", default="fp16", help="dct: dct_values")
    parser.add_argument("--no-momentum-correction", action="store_true",
                        help="dct: SGD's own momentum on the decompressed sum instead")
    parser.add_argument("--double-momentum", action="store_true",
                        help="dct: SGD's momentum as well as the hook's (the misuse "
                             "DCTHookState.check_optimizer refuses; to measure it)")
    parser.add_argument("--powersgd-rank", type=int, default=1)
    parser.add_argument("--train-limit", type=int, default=0, help="first N training images")
    parser.add_argument("--test-limit", type=int, default=0)
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--checkpoint", help="dct: save the hook's state here after training")
    parser.add_argument("--json", help="write the per-epoch figures here (rank 0)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    rank, size = dct.torch.init_process_group_from_mpi()
    x_train, y_train = load(args.data, "train", args.train_limit)
    x_test, y_test = load(args.data, "test", args.test_limit)

    torch.manual_seed(args.seed)
    widths = [784] + [int(w) for w in args.hidden.split(",")] + [10]
    layers = []
    for inputs, outputs in zip(widths[:-1], widths[1:]):
        layers += [torch.nn.Linear(inputs, outputs), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    parameters = sum(p.numel() for p in model.parameters())
    counter = None
    optimizer_momentum = args.momentum
    if args.hook == "fp16":
        counter = CountingAllreduce(size)
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.hook == "powersgd":
        counter = CountingAllreduce(size)
        state = powersgd.PowerSGDState(process_group=None,
                                       matrix_approximation_rank=args.powersgd_rank,
                                       start_powerSGD_iter=2, random_seed=args.seed)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)
    elif args.hook == "dct":
        correction = 0.0 if args.no_momentum_correction else args.momentum
        state = dct.torch.DCTHookState(density=args.density, values=args.values,
                                       momentum=correction or None,
                                       overlap=args.overlap)
        ddp.register_comm_hook(state, dct.torch.dct_hook)
        if correction and not args.double_momentum:
            optimizer_momentum = 0.0
    elif args.hook == "local":
        ddp.register_comm_hook(None, local_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=optimizer_momentum)
    if args.hook == "dct" and not args.double_momentum:
        state.check_optimizer(optimizer)

    dense_per_step = 2.0 * (size - 1) / size * parameters * 4
    steps = len(x_train) // (args.batch * size)
    results, hook_seconds = [], 0.0
    for epoch in range(1, args.epochs + 1):
        order = torch.from_numpy(np.random.default_rng([args.seed, epoch]).permutation(len(x_train)))
        mine = order[rank::size]
        ddp.train()
        loss_sum, start = 0.0, time.perf_counter()
        for step in range(steps):
            batch = mine[step * args.batch:(step + 1) * args.batch]
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(ddp(x_train[batch]), y_train[batch])
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
        step_ms = 1e3 * (time.perf_counter() - start) / steps
        ddp.eval()
        with torch.no_grad():
            accuracy = (model(x_test).argmax(1) == y_test).float().mean().item() * 100
        dense = dense_per_step * steps * epoch
        if args.hook == "none":
            sent = dense
        elif args.hook == "local":
            sent = 0.0
        elif args.hook == "dct":
            sent, dense = state.bytes_sent, state.dense_bytes
        else:
            sent = counter.bytes
        row = {"epoch": epoch, "loss": loss_sum / steps, "accuracy": accuracy,
               "bytes_sent": sent, "dense_bytes": dense, "ratio": dense / sent if sent else 0.0,
               "step_ms": step_ms}
        if args.hook == "dct":
            row["hook_ms"] = 1e3 * (state.hook_seconds - hook_seconds) / steps
            hook_seconds = state.hook_seconds
        results.append(row)
        if rank == 0:
            print(f"{args.hook:8s} epoch {epoch}: loss {row['loss']:.4f}  test accuracy "
                  f"{accuracy:.2f}%  bytes/rank {sent / 1e6:.2f} MB ({row['ratio']:.1f}x fewer "
                  f"than DDP's allreduce)  step {step_ms:.2f} ms"
                  + (f" (hook {row['hook_ms']:.2f} ms)" if "hook_ms" in row else ""), flush=True)
    checksum = float(sum(p.double().sum() for p in model.parameters()))
    if args.hook == "dct" and args.checkpoint:
        state.save(args.checkpoint)
    if rank == 0:
        print(f"parameter checksum {checksum:.10e}")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"args": vars(args), "ranks": size, "epochs": results,
                           "checksum": checksum}, f, indent=1)
    if args.hook == "dct":
        state.free()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
