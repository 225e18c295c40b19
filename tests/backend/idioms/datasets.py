"""Map-style and iterable datasets importable by DataLoader workers (spawn/forkserver re-import them by name)."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info


class SquaresDataset(Dataset):
    """Item i is (a float row derived from i, the int64 label i % 3): every value is known, so batches can be
    checked exactly whatever worker produced them."""

    def __init__(self, n: int = 24, width: int = 5) -> None:
        self.n, self.width = n, width

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        row = torch.arange(self.width, dtype=torch.float32) + i * i
        return row, torch.tensor(i % 3)


class DictDataset(SquaresDataset):
    """Batches as dicts of tensors plus a non-tensor field, as Hugging Face collators produce."""

    def __getitem__(self, i: int) -> dict:
        row, label = super().__getitem__(i)
        return {"input": row, "label": label, "name": f"item{i}"}


class ShardedStream(IterableDataset):
    """An iterable dataset that splits its range between workers (the pattern in the DataLoader docs)."""

    def __init__(self, n: int = 20) -> None:
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.n, step):
            yield torch.full((3,), float(i))


class RandomCropDataset(Dataset):
    """Draws from the global torch RNG inside __getitem__ (augmentation-style): reproducibility then depends on
    the DataLoader's per-worker seeding."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.rand(2) + i
