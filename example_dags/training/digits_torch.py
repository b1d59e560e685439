"""Distributed data-parallel training of a digits classifier with PyTorch (gloo, CPU).

Run as the command of every Master and Worker replica of a PyTorchJob: the operator's MASTER_ADDR,
MASTER_PORT, WORLD_SIZE and RANK are what ``init_process_group(init_method="env://")`` reads, so
no launcher (torchrun) is needed with one process per replica. Without them it trains alone.

Each replica reads its own shard of the training split (DistributedSampler); DistributedDataParallel
averages the gradients, so every replica holds the same weights after each step and evaluates the
same model on the whole test split.

Output (Katib StdOut format, from every replica, the values summed over all replicas so that any
replica's log tells the same story): ``epoch=N loss=... accuracy=...`` per epoch and
``test_accuracy=...`` at the end.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

from digits_common import (
    SEED,
    Rendezvous,
    checkpoint_path,
    checkpoint_to_resume,
    emit,
    exit_code,
    load_digits_split,
    open_checkpoint,
    parse_args,
    write_checkpoint,
    write_result,
)


def train(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    rv = Rendezvous.from_env()

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    torch.manual_seed(SEED)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    # Two cores are shared by all replicas on a small machine; more threads per process only contend.
    torch.set_num_threads(1)
    # The timeout bounds the wait for late replicas (a Worker starts before its Master is Ready).
    timeout = timedelta(minutes=5)
    if rv.world_size == 1:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    else:
        dist.init_process_group("gloo", init_method="env://", timeout=timeout)
    print(f"{rv}: rank {dist.get_rank()} of {dist.get_world_size()}, master {rv.addr}:{rv.port}", flush=True)

    data = load_digits_split()
    train_set = TensorDataset(torch.from_numpy(data.x_train), torch.from_numpy(data.y_train))
    # drop_last keeps every replica on the same number of steps, so no all-reduce waits forever.
    sampler = DistributedSampler(train_set, shuffle=True, seed=SEED, drop_last=True)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    model = DistributedDataParallel(
        nn.Sequential(
            nn.Linear(64, args.hidden_units),
            nn.ReLU(),
            nn.Linear(args.hidden_units, args.hidden_units),
            nn.ReLU(),
            nn.Linear(args.hidden_units, 10),
        )
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")

    # checkpoint=: every replica loads the newest checkpoint (the same file, so the same weights);
    # rank 0 writes one after every epoch and says so in its log.
    first = 1
    found = checkpoint_to_resume("pt")
    if found is not None:
        state = torch.load(open_checkpoint(found), map_location="cpu")
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first = found.epoch + 1
    result: dict[str, Any] = {}
    for epoch in range(first, args.epochs + 1):
        sampler.set_epoch(epoch)  # a different shuffle each epoch, the same on every replica
        model.train()
        # [summed loss, correct, examples] over this replica's batches, then over all replicas.
        totals = torch.zeros(3, dtype=torch.float64)
        for x, y in loader:
            optimizer.zero_grad()
            logits = model(x)
            loss = loss_fn(logits, y)
            (loss / len(y)).backward()
            optimizer.step()
            totals += torch.tensor([loss.item(), (logits.argmax(1) == y).sum().item(), len(y)])
        dist.all_reduce(totals, op=dist.ReduceOp.SUM)
        epoch_loss, accuracy = (totals[0] / totals[2]).item(), (totals[1] / totals[2]).item()
        emit(epoch=epoch, loss=epoch_loss, accuracy=accuracy)
        result.update(epoch=epoch, loss=epoch_loss, accuracy=accuracy)
        target = checkpoint_path(epoch, "pt") if rv.is_master else None
        if target is not None:
            state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict()}
            write_checkpoint(target, lambda path, state=state: save(state, path))

    model.eval()
    with torch.no_grad():
        predicted = model.module(torch.from_numpy(data.x_test)).argmax(1)
    test_accuracy = (predicted == torch.from_numpy(data.y_test)).double().mean().item()
    emit(test_accuracy=test_accuracy)
    result["test_accuracy"] = test_accuracy

    if args.model_dir and rv.is_master:
        write_result(args.model_dir, result)
        torch.save(model.module.state_dict(), f"{args.model_dir}/model.pt")
        print(f"model saved to {args.model_dir}", flush=True)
    # No replica leaves (and closes its sockets) while another still talks to it.
    dist.barrier()
    dist.destroy_process_group()
    return result


def save(state: dict[str, Any], path: str) -> None:
    import torch

    with open(path, "wb") as fh:  # a file object: torch names the archive after a path's base name
        torch.save(state, fh)


if __name__ == "__main__":
    sys.exit(exit_code(train))
