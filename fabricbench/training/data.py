"""Training batches: synthetic by default, or a local dataset folder.

    fabricbench train --model tiny-dinov2 --device cpu --nprocs 2 --dataset ./food-sample

Synthetic: one fixed random batch per rank, repeated every step. Throughput does not depend on content,
and a model that sees the same batch again must memorise it, so the loss has to fall: that is the
"it trained" check. `--dataset DIR`:
- image classification: DIR/<class>/<image> (any format Pillow opens), classes in sorted order, resized to
  --image-size, scaled to [0, 1] and normalised with the ImageNet mean and std;
- causal LM: the *.txt files of DIR read as UTF-8 bytes (byte-level tokens, id = byte mod vocab), or *.npy
  arrays of token ids, concatenated and cut into --seq-len windows.
Ranks read disjoint, strided parts; the data cycles when it runs out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from fabricbench.errors import UsageError
from fabricbench.training.models import CAUSAL_LM

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}


def batches(*, task: str, config: Any, batch_size: int, seq_len: int, image_size: int, dataset: str | None,
            rank: int, world: int, device: Any, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Endless batches of `batch_size` samples for this rank, on `device`."""
    import torch

    if dataset is None:
        g = torch.Generator().manual_seed(seed * 1000 + rank)
        if task == CAUSAL_LM:
            ids = torch.randint(0, config.vocab_size, (batch_size, seq_len), generator=g)
            fixed = {"input_ids": ids.to(device), "labels": ids.to(device)}
        else:
            px = torch.randn(batch_size, 3, image_size, image_size, generator=g)
            lab = torch.randint(0, config.num_labels, (batch_size,), generator=g)
            fixed = {"pixel_values": px.to(device), "labels": lab.to(device)}
        while True:
            yield fixed
    samples = _token_windows(dataset, config, seq_len) if task == CAUSAL_LM else _images(dataset, config,
                                                                                          image_size)
    mine = samples[rank::world]
    if len(mine) == 0:
        raise UsageError(f"--dataset {dataset}: {len(samples)} samples cannot feed {world} ranks")
    i = 0
    while True:
        chunk = [mine[(i + k) % len(mine)] for k in range(batch_size)]
        i += batch_size
        yield {key: torch.stack([s[key] for s in chunk]).to(device) for key in chunk[0]}


def _token_windows(dataset: str, config: Any, seq_len: int) -> list[dict[str, Any]]:
    import numpy as np
    import torch

    root = Path(dataset)
    files = sorted(root.rglob("*.txt")) + sorted(root.rglob("*.npy")) if root.is_dir() else [root]
    parts = []
    for f in files:
        if f.suffix == ".npy":
            parts.append(np.load(f).astype(np.int64).ravel() % config.vocab_size)
        else:
            parts.append(np.frombuffer(f.read_bytes(), dtype=np.uint8).astype(np.int64) % config.vocab_size)
    tokens = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    n = len(tokens) // seq_len
    if n == 0:
        raise UsageError(f"--dataset {dataset}: {len(tokens)} tokens in *.txt/*.npy make no window of "
                         f"--seq-len {seq_len}")
    win = torch.from_numpy(tokens[: n * seq_len].reshape(n, seq_len).copy())
    return [{"input_ids": w, "labels": w} for w in win]


def _images(dataset: str, config: Any, image_size: int) -> list[dict[str, Any]]:
    import numpy as np
    import torch
    from PIL import Image

    root = Path(dataset)
    classes = sorted(d.name for d in root.iterdir() if d.is_dir()) if root.is_dir() else []
    if not classes:
        raise UsageError(f"--dataset {dataset}: expected class subfolders DIR/<class>/<image>")
    if len(classes) > config.num_labels:
        raise UsageError(f"--dataset {dataset} has {len(classes)} classes but the model's head has "
                         f"{config.num_labels}")
    mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
    out = []
    for label, cls in enumerate(classes):
        for f in sorted((root / cls).iterdir()):
            if f.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            img = Image.open(f).convert("RGB").resize((image_size, image_size), Image.BILINEAR)
            px = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)
            out.append({"pixel_values": (px - mean) / std, "labels": torch.tensor(label)})
    if not out:
        raise UsageError(f"--dataset {dataset}: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) found")
    return out


def check(*, task: str, config: Any, dataset: str | None, seq_len: int, world: int) -> None:
    """The checks batches() makes, made once before any process starts and without loading the data:
    a UsageError that says what is wrong with --dataset (the same messages as above)."""
    if dataset is None:
        return
    root = Path(dataset)
    if task == CAUSAL_LM:
        files = sorted(root.rglob("*.txt")) + sorted(root.rglob("*.npy")) if root.is_dir() else [root]
        tokens = 0
        for f in files:
            if f.suffix == ".npy":
                import numpy as np

                tokens += int(np.load(f, mmap_mode="r").size)
            else:
                tokens += f.stat().st_size  # one token per byte (_token_windows)
        samples = tokens // seq_len
        if samples == 0:
            raise UsageError(f"--dataset {dataset}: {tokens} tokens in *.txt/*.npy make no window of "
                             f"--seq-len {seq_len}")
    else:
        classes = sorted(d for d in root.iterdir() if d.is_dir()) if root.is_dir() else []
        if not classes:
            raise UsageError(f"--dataset {dataset}: expected class subfolders DIR/<class>/<image>")
        if len(classes) > config.num_labels:
            raise UsageError(f"--dataset {dataset} has {len(classes)} classes but the model's head has "
                             f"{config.num_labels}")
        samples = sum(1 for c in classes for f in c.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
        if samples == 0:
            raise UsageError(f"--dataset {dataset}: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) found")
    if samples < world:
        raise UsageError(f"--dataset {dataset}: {samples} samples cannot feed {world} ranks")
