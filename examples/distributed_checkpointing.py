"""Fine-tune a ResNet-50 to sort product photos into defect classes, one GPU per process.

    torchrun --nproc_per_node=4 examples/distributed_checkpointing.py --data /data/defects

Training resumes from `--out/last.pt` when it exists; the ImageNet weights are read from
`--init` for a fresh run.
"""

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, models
from torchvision import transforms as T


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--init", type=Path, default=Path("resnet50_imagenet.pt"))
    parser.add_argument("--out", type=Path, default=Path("runs/defects"))
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64, help="per GPU")
    parser.add_argument("--classes", type=int, default=6)
    parser.add_argument("--workers", type=int, default=8)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.manual_seed(0)

    train_set = datasets.ImageFolder(
        args.data / "train",
        T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor()]),
    )
    sampler = DistributedSampler(train_set, seed=0)
    loader = DataLoader(
        train_set,
        batch_size=args.batch_size,
        sampler=sampler,
        num_workers=args.workers,
        pin_memory=True,
    )

    model = models.resnet50(num_classes=args.classes)
    last = args.out / "last.pt"
    start_epoch = 0
    if last.exists():
        checkpoint = torch.load(last, map_location="cpu")
        model.load_state_dict(checkpoint["model"])
        start_epoch = checkpoint["epoch"] + 1
    else:
        # The ImageNet head has 1000 classes: everything but `fc` is loaded.
        weights = torch.load(args.init, map_location="cpu")
        weights = {k: v for k, v in weights.items() if not k.startswith("fc.")}
        model.load_state_dict(weights, strict=False)

    model = model.cuda(local_rank)
    model = DDP(model)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for images, labels in loader:
            images = images.cuda(non_blocking=True)
            labels = labels.cuda(non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        args.out.mkdir(parents=True, exist_ok=True)
        torch.save({"model": model.state_dict(), "epoch": epoch}, last)
        print(f"epoch {epoch}: loss {loss.item():.4f}, saved {last}")

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
