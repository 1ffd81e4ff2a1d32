"""Data-parallel training of a ResNet-50 on ImageNet-style folders, one GPU per process.

    torchrun --nproc_per_node=8 examples/train_ddp.py --data /datasets/imagenet --epochs 90

Blocks of the network are recomputed in the backward pass (activation checkpointing) to fit a
larger batch per GPU.
"""

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, models
from torchvision import transforms as T


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=90)
    parser.add_argument("--batch-size", type=int, default=128, help="per GPU")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("checkpoints"))
    return parser.parse_args()


class CheckpointedResNet(nn.Module):
    """ResNet-50 whose four stages are recomputed during backward."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        net = models.resnet50(num_classes=num_classes)
        self.stem = nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool)
        self.stages = nn.ModuleList([net.layer1, net.layer2, net.layer3, net.layer4])
        self.pool = net.avgpool
        self.fc = net.fc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for stage in self.stages:
            x = checkpoint(stage, x)
        return self.fc(torch.flatten(self.pool(x), 1))


def build_loaders(root: Path, batch_size: int, workers: int) -> tuple[DataLoader, DataLoader]:
    normalize = T.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    train_set = datasets.ImageFolder(
        root / "train",
        T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), normalize]),
    )
    val_set = datasets.ImageFolder(
        root / "val", T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), normalize])
    )
    train_sampler = DistributedSampler(train_set, drop_last=True)
    train_loader = DataLoader(
        train_set,
        batch_size=batch_size,
        sampler=train_sampler,
        shuffle=True,
        num_workers=workers,
        pin_memory=True,
        persistent_workers=True,
    )
    val_loader = DataLoader(
        val_set,
        batch_size=batch_size,
        sampler=DistributedSampler(val_set, shuffle=False),
        num_workers=workers,
        pin_memory=True,
    )
    return train_loader, val_loader


@torch.no_grad()
def validate(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    model.eval()
    correct = torch.zeros((), device=device)
    seen = torch.zeros((), device=device)
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        correct += (model(images).argmax(dim=1) == labels).sum()
        seen += labels.numel()
    dist.all_reduce(correct)
    dist.all_reduce(seen)
    return (correct / seen).item()


def main() -> None:
    args = parse_args()
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)

    train_loader, val_loader = build_loaders(args.data, args.batch_size, args.workers)

    model = CheckpointedResNet()
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model).to(device)
    model = DDP(model, device_ids=[local_rank])
    lr = args.lr * args.batch_size * dist.get_world_size() / 256
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    for epoch in range(args.epochs):
        model.train()
        for step, (images, labels) in enumerate(train_loader):
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if rank == 0 and step % 100 == 0:
                print(f"epoch {epoch} step {step}/{len(train_loader)} loss {loss.item():.4f}")
        scheduler.step()

        top1 = validate(model, val_loader, device)
        if rank == 0:
            print(f"epoch {epoch}: top-1 {top1:.2%}")
            args.out.mkdir(parents=True, exist_ok=True)
            torch.save(
                {
                    "epoch": epoch,
                    "model": model.module.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                },
                args.out / f"epoch{epoch:03d}.pt",
            )

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
