"""Train a small vision transformer on CIFAR-10 on one GPU.

    python examples/train_classifier.py

Downloads CIFAR-10 to ./data on first run and writes classifier.pt.
"""

import math
import time

import torch
import torch.nn.functional as F
import torchvision
import torchvision.transforms as T
from torch import nn
from torch.utils.data import DataLoader

EPOCHS = 30
BATCH_SIZE = 256
LR = 3e-4
WEIGHT_DECAY = 0.05
PATCH = 4
DIM = 192
DEPTH = 6
HEADS = 3

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        out = (attn @ v).permute(0, 2, 1, 3).view(b, n, c)
        return self.proj(out)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Linear(dim * 4, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, num_classes: int = 10, image_size: int = 32) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, DIM, kernel_size=PATCH, stride=PATCH)
        num_patches = (image_size // PATCH) ** 2
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches, DIM))
        self.blocks = nn.Sequential(*[Block(DIM, HEADS) for _ in range(DEPTH)])
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, num_classes)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = self.blocks(x + self.pos_embed)
        return self.head(self.norm(x).mean(dim=1))


def cosine_lr(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def evaluate(model: nn.Module, loader: DataLoader) -> tuple[float, float]:
    model.eval()
    total_loss, correct, seen = 0.0, 0, 0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        logits = model(images)
        total_loss += F.cross_entropy(logits, labels, reduction="sum").item()
        correct += (logits.argmax(dim=1) == labels).sum().item()
        seen += labels.numel()
    return total_loss / seen, correct / seen


mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
train_tf = T.Compose(
    [T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(mean, std)]
)
test_tf = T.Compose([T.ToTensor(), T.Normalize(mean, std)])
train_set = torchvision.datasets.CIFAR10("data", train=True, download=True, transform=train_tf)
test_set = torchvision.datasets.CIFAR10("data", train=False, download=True, transform=test_tf)

train_loader = DataLoader(
    train_set, batch_size=BATCH_SIZE, shuffle=True, num_workers=4, pin_memory=True, drop_last=True
)
test_loader = DataLoader(test_set, batch_size=512, num_workers=4, pin_memory=True)

model = ViT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
total_steps = EPOCHS * len(train_loader)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda step: cosine_lr(step, total_steps, warmup=len(train_loader))
)

for epoch in range(EPOCHS):
    model.train()
    start = time.perf_counter()
    running = 0.0
    for images, labels in train_loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        running += loss.item()
    test_loss, test_acc = evaluate(model, test_loader)
    print(
        f"epoch {epoch + 1:2d}/{EPOCHS}  train loss {running / len(train_loader):.3f}  "
        f"test loss {test_loss:.3f}  acc {test_acc:.2%}  ({time.perf_counter() - start:.0f}s)"
    )

torch.save(model, "classifier.pt")
