"""A real PyTorch DistributedDataParallel job on CPUs (gloo), for
`torchrun --standalone --nproc_per_node=N`, with one slow rank.

    ddp_train.py OUT_DIR STEPS SLOW_RANK loader|compute|none

Each rank: a small model wrapped in DDP (gloo, loopback), fed by a
DataLoader of 2 workers; per step it takes a batch (its wait for it,
measured), computes for COMPUTE_MS (spinning on small matrix products:
what a CPU rank does in forward), then runs backward(), which holds DDP's
all-reduce (its time, measured: the healthy ranks wait there for the slow
one). The slow rank's workers sleep SLOW_LOADER_MS per sample (`loader`),
or it computes SLOW_FACTOR times as long (`compute`). Times are in wall
time, so any machine waits alike. Each rank writes OUT_DIR/rank-R.json:
its pid, rank, data_wait_ns, backward_ns, steps.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

COMPUTE_MS = float(os.environ.get("DDP_COMPUTE_MS", "25"))
SLOW_FACTOR = float(os.environ.get("DDP_SLOW_FACTOR", "3"))
SAMPLE_MS = float(os.environ.get("DDP_SAMPLE_MS", "2"))
SLOW_LOADER_MS = float(os.environ.get("DDP_SLOW_LOADER_MS", "40"))
BATCH = 4
FEATURES = 256


class Samples(Dataset):
    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(FEATURES, generator=g), torch.randn(1, generator=g)


def spin(ms, x, w):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        x = torch.tanh(x @ w)
    return x


def main():
    out, steps, slow_rank, how = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    slow = rank == slow_rank
    sample_ms = SLOW_LOADER_MS if slow and how == "loader" else SAMPLE_MS
    compute_ms = COMPUTE_MS * (SLOW_FACTOR if slow and how == "compute" else 1)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(FEATURES, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Samples(steps * BATCH, sample_ms / 1000), batch_size=BATCH, num_workers=2)
    w = torch.randn(64, 64) / 8
    waited = backward = 0
    it = iter(loader)
    for _ in range(steps):
        t = time.perf_counter_ns()
        x, y = next(it)
        waited += time.perf_counter_ns() - t
        h = spin(compute_ms, torch.randn(8, 64), w)
        loss = torch.nn.functional.mse_loss(model(x), y) + h.mean() * 0
        opt.zero_grad()
        t = time.perf_counter_ns()
        loss.backward()
        backward += time.perf_counter_ns() - t
        opt.step()
    dist.barrier()
    with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
        json.dump({"pid": os.getpid(), "rank": rank, "data_wait_ns": waited, "backward_ns": backward,
                   "steps": steps}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
