"""PyTorch DistributedDataParallel (gloo, CPU) on the digits data set.

Reads only torch.distributed's own environment (`RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`,
`LOCAL_RANK`) and DTF_OUTPUT_PATH, so the same file runs under `torchrun` on YARN (`ytf-submit --framework
pytorch … torchrun digits_torch.py`), as one plain process per container (`python digits_torch.py`) and by
hand under torchrun on one machine. Rank 0 saves a checkpoint after every epoch (`torch.save` to a temporary
name, then one rename: the file is whole or absent) and every rank resumes from it, so a later attempt goes
on from the last finished epoch (rank 0 reads it and hands it to the others), as do the processes torchrun
restarts when an elastic job's group re-forms. Rank 0 writes metrics.json: the test accuracy, and each rank's place
(rank, local rank, node rank, world size) and a digest of its parameters, which DDP keeps identical.
Each process says once when it has done its first optimizer step (`rank R: first step at epoch E at <time>
(process up U s, C s CPU)`): after an elastic group re-forms, the moment the training steps again
(bench/torch_elastic.py measures it).

    [torchrun] python digits_torch.py [--epochs N] [--steps-per-epoch S] [--batch B] [--sleep-per-epoch S]
"""

from __future__ import annotations

import datetime
import hashlib
import os
import tempfile
import time

BEGAN = time.time()  # before torch's import: the first-step line says how long this process took to step

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

from tony_airflow.examples.digits_data import load, progress_module, training_args, write_metrics  # noqa: E402

CHECKPOINT = "checkpoint.pt"


def build_model() -> nn.Module:
    """The digits examples' classifier (64 features -> 64 ReLU -> 10 logits), as in digits_data.build_model."""
    torch.manual_seed(7)  # the same start on every rank (DDP also broadcasts rank 0's)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def save_checkpoint(directory: str, state: dict) -> None:
    """Whole or absent: written under a name of its own, then renamed over the last one."""
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{CHECKPOINT}.", suffix=".part", dir=directory)
    os.fchmod(fd, 0o644)  # as open() would make it, not mkstemp's 0600
    with os.fdopen(fd, "wb") as fh:
        torch.save(state, fh)
    os.replace(tmp, os.path.join(directory, CHECKPOINT))


def load_checkpoint(directory: str) -> dict | None:
    path = os.path.join(directory, CHECKPOINT)
    return torch.load(path, weights_only=True) if os.path.exists(path) else None


def parameter_digest(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def _since_start() -> str:
    """How long this process has been up (from this module's start, before torch's import), and its CPU
    seconds: where a restart's seconds went (torch's import, the group's init, the checkpoint) and how much of
    them it waited for a core."""
    return f"process up {time.time() - BEGAN:.2f} s, {time.process_time():.2f} s CPU"


def main() -> None:
    args = training_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = os.environ.get("DTF_OUTPUT_PATH") or tempfile.mkdtemp()
    features, labels = load("train")
    x, y = torch.from_numpy(features), torch.from_numpy(labels)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    start_epoch = 0
    # rank 0's checkpoint for every rank (the others' copies of the output path may lag behind its own), so
    # that every rank resumes at the same epoch with the same optimizer state
    box = [load_checkpoint(out) if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    saved = box[0]
    if saved is not None:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        start_epoch = saved["epoch"] + 1
    print(f"rank {rank} of {world}: {'resuming at epoch ' + str(start_epoch) if saved else 'starting fresh'}",
          flush=True)
    ddp = DistributedDataParallel(model)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(1000 + rank)
    epoch_seconds = []
    stepped = False
    progress = progress_module(args)
    report = progress.report if progress else None  # the job's progress (docs/progress.md)
    for epoch in range(start_epoch, args.epochs):
        began = time.perf_counter()
        for step in range(args.steps_per_epoch):
            batch = torch.randint(len(x), (args.batch,), generator=generator)  # each rank its own samples
            optimizer.zero_grad()
            loss = loss_fn(ddp(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
            if not stepped:  # DDP's backward waits for every rank: all of them step again at about this time
                stepped = True
                print(f"rank {rank}: first step at epoch {epoch} at {_now()} ({_since_start()})", flush=True)
            if report is not None:
                report(step=epoch * args.steps_per_epoch + step + 1, total_steps=args.epochs * args.steps_per_epoch,
                       epoch=epoch + 1, total_epochs=args.epochs, metrics={"loss": loss.item()})
        epoch_seconds.append(time.perf_counter() - began)
        if rank == 0:
            save_checkpoint(out, {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch})
            print(f"epoch {epoch} loss {loss.item():.4f} at {_now()}", flush=True)
        time.sleep(args.sleep_per_epoch)
    place = {"rank": rank, "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
             "node_rank": int(os.environ.get("GROUP_RANK", os.environ.get("RANK", "0"))),
             "world_size": world, "host": os.environ.get("NM_HOST", ""),
             "task": f"{os.environ.get('DTF_TASK_JOB_NAME', '')}:{os.environ.get('DTF_TASK_INDEX', '')}",
             "container": os.environ.get("CONTAINER_ID", ""), "parameters": parameter_digest(model)}
    places: list = [None] * world
    dist.all_gather_object(places, place)
    if rank == 0:
        tx, ty = load("test")
        with torch.no_grad():
            accuracy = float((model(torch.from_numpy(tx)).argmax(dim=1).numpy() == ty).mean())
        steps = args.steps_per_epoch * len(epoch_seconds)
        write_metrics(out, "metrics.json", {
            "attempt": int(os.environ.get("TONY_ATTEMPT", "1")), "resumed_at_epoch": start_epoch,
            "restarts": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
            "test_accuracy": accuracy, "world_size": world, "ranks": places,
            "epoch_seconds": [round(t, 3) for t in epoch_seconds],
            "steps_per_second": steps / sum(epoch_seconds) if sum(epoch_seconds) else 0.0,
        })
        # the output as the job named it (hdfs://...), not the container's local mirror of it
        print(f"test accuracy {accuracy:.4f}; checkpoint and metrics in {os.environ.get('DTF_OUTPUT_URI') or out}",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
