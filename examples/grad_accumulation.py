"""Train an image classifier with gradient accumulation, mixed precision and gradient clipping.

    python examples/grad_accumulation.py --data data/images --accum-steps 8

Small GPUs fit only a few images per batch, so gradients of `--accum-steps` micro-batches are
summed before each optimizer step.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, models, transforms


def build_loader(root: str, batch_size: int) -> DataLoader:
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    dataset = datasets.ImageFolder(root, transform=tf)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=4, pin_memory=True)


def train_epoch(model, loader, optimizer, scaler, accum_steps: int, device: str) -> float:
    model.train()
    running_loss = 0.0
    for step, (images, labels) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        optimizer.zero_grad()
        with torch.autocast(device):
            loss = F.cross_entropy(model(images), labels) / accum_steps
        scaler.scale(loss).backward()
        if (step + 1) % accum_steps == 0:
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            scaler.step(optimizer)
            scaler.update()
        running_loss += loss
    return float(running_loss) / len(loader)


def finetune_head(model, loader, device: str, epochs: int = 1) -> None:
    """A short full-precision pass that trains only the classifier head."""
    head = model.fc
    optimizer = torch.optim.SGD(head.parameters(), lr=0.01, momentum=0.9)
    for _ in range(epochs):
        for images, labels in loader:
            optimizer.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model(images.to(device)), labels.to(device))
            loss.backward()
            optimizer.step()
            nn.utils.clip_grad_norm_(head.parameters(), max_norm=1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--accum-steps", type=int, default=8)
    args = parser.parse_args()

    device = "cuda"
    model = models.resnet50(num_classes=100).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
    scaler = torch.amp.GradScaler(device)
    loader = build_loader(args.data, args.batch_size)
    for epoch in range(args.epochs):
        loss = train_epoch(model, loader, optimizer, scaler, args.accum_steps, device)
        print(f"epoch {epoch}: loss {loss:.4f}")
    finetune_head(model, loader, device)


if __name__ == "__main__":
    main()
