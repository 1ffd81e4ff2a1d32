"""Fine-tune a small GPT-style language model with mixed precision.

    python examples/amp_training.py --tokens data/train.bin --steps 5000

`data/train.bin` is a flat array of uint16 token ids (as written by most tokenizer scripts).
"""

import argparse
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.cuda.amp import GradScaler, autocast
from torch.utils.data import DataLoader, Dataset


class TokenWindows(Dataset):
    """Random windows of `block_size + 1` tokens from a memory-mapped token file."""

    def __init__(self, path: Path, block_size: int) -> None:
        self.tokens = np.memmap(path, dtype=np.uint16, mode="r")
        self.block_size = block_size

    def __len__(self) -> int:
        return len(self.tokens) // (self.block_size + 1)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = index * (self.block_size + 1)
        chunk = torch.from_numpy(self.tokens[start : start + self.block_size + 1].astype(np.int64))
        return chunk[:-1], chunk[1:]


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, block_size: int, dim: int = 384, depth: int = 6, heads: int = 6):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(block_size, dim)
        self.layers = nn.ModuleList()
        for _ in range(depth):
            self.layers.append(
                nn.ModuleDict(
                    {
                        "ln1": nn.LayerNorm(dim),
                        "attn": CausalSelfAttention(dim, heads),
                        "ln2": nn.LayerNorm(dim),
                        "mlp": nn.Sequential(
                            nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)
                        ),
                    }
                )
            )
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(positions)
        for layer in self.layers:
            x = x + layer["attn"](layer["ln1"](x))
            x = x + layer["mlp"](layer["ln2"](x))
        return self.head(self.ln_f(x))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=Path, default=Path("data/train.bin"))
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--lr", type=float, default=6e-4)
    args = parser.parse_args()

    device = torch.device("cuda")
    dataset = TokenWindows(args.tokens, args.block_size)
    loader = DataLoader(
        dataset, batch_size=args.batch_size, shuffle=True, num_workers=4, pin_memory=True
    )

    model = TinyGPT(args.vocab, args.block_size).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95))
    scaler = GradScaler()

    step = 0
    while step < args.steps:
        for inputs, targets in loader:
            inputs = inputs.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            lr = (
                args.lr
                * min(1.0, (step + 1) / 200)
                * 0.5
                * (1 + math.cos(math.pi * step / args.steps))
            )
            for group in optimizer.param_groups:
                group["lr"] = lr

            optimizer.zero_grad(set_to_none=True)
            with autocast():
                logits = model(inputs)
                loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
                scaler.scale(loss).backward()
            optimizer.step()
            scaler.update()

            if step % 100 == 0:
                print(f"step {step:5d}  loss {loss.item():.3f}  lr {lr:.2e}")
            step += 1
            if step == args.steps:
                break

    torch.save(model.state_dict(), "tinygpt.pt")


if __name__ == "__main__":
    main()
