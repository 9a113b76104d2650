"""A real PyTorch DataLoader whose workers read files: each item is one
file, read whole by the dataset's __getitem__ on the line marked below.

    torch_loader.py DATA_DIR fork|spawn

Makes 64 files of 32 KiB in DATA_DIR (if missing), then iterates a
DataLoader over them with 2 workers started by the given context, and
prints `items N` (the files read, each once).
"""
import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset

FILES = 64
SIZE = 32 << 10


class Files(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            data = f.read()  # THE READ
        return torch.frombuffer(bytearray(data), dtype=torch.uint8).sum()


def main():
    data, context = sys.argv[1], sys.argv[2]
    os.makedirs(data, exist_ok=True)
    paths = [os.path.join(data, f"item-{i:03}.bin") for i in range(FILES)]
    for p in paths:
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(os.urandom(SIZE))
    loader = DataLoader(Files(paths), batch_size=8, num_workers=2, multiprocessing_context=context)
    n = sum(len(b) for b in loader)
    print(f"items {n}")


if __name__ == "__main__":
    main()
