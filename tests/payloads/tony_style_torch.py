"""Payload: a program written for TonY's PyTorch runtime, which sets INIT_METHOD, RANK and WORLD (not
torch's env:// names): it joins the group with them and sums the ranks. Prints `tony-style OK <rank> <sum>`."""
import os

import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD"])
dist.init_process_group("gloo", init_method=os.environ["INIT_METHOD"], rank=rank, world_size=world)
total = torch.tensor([float(rank)])
dist.all_reduce(total)
assert total.item() == world * (world - 1) / 2, total
print(f"tony-style OK {rank} {int(total.item())}", flush=True)
dist.destroy_process_group()
