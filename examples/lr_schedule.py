"""Sentiment classifier over pre-tokenised reviews, with a one-cycle learning-rate schedule.

    python examples/lr_schedule.py --data reviews.pt --epochs 8 --accum 4

`reviews.pt` holds `{"train": (ids, labels), "val": (ids, labels)}` with `ids` of shape
`(reviews, 256)`. Uses every GPU of the machine; the effective batch is `--batch-size * --accum`.
"""

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB = 30_000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--accum", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--out", type=Path, default=Path("sentiment.pt"))
    return parser.parse_args()


class ReviewClassifier(nn.Module):
    """Convolutions of several widths over the word embeddings, max-pooled over time."""

    def __init__(self, dim: int = 300, channels: int = 256, widths: tuple = (3, 4, 5)) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(dim, channels, w, padding=w // 2) for w in widths)
        self.dropout = nn.Dropout(0.5)
        self.head = nn.Linear(channels * len(widths), 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids).transpose(1, 2)  # (batch, dim, words)
        pooled = [F.relu(conv(x)).amax(dim=2) for conv in self.convs]
        return self.head(self.dropout(torch.cat(pooled, dim=1)))


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    model.eval()
    correct = seen = 0
    for ids, labels in loader:
        preds = model(ids.to(device, non_blocking=True)).argmax(1).cpu()
        correct += (preds == labels).sum().item()
        seen += labels.numel()
    return correct / seen


def main() -> None:
    args = parse_args()
    # Reproducible runs for the ablation table.
    torch.use_deterministic_algorithms(True)
    device = torch.device("cuda")
    data = torch.load(args.data, map_location="cpu")
    train_loader = DataLoader(
        TensorDataset(*data["train"]),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=4,
        pin_memory=True,
    )
    val_loader = DataLoader(TensorDataset(*data["val"]), batch_size=256, pin_memory=True)

    net = ReviewClassifier().to(device)
    model = nn.DataParallel(net) if torch.cuda.device_count() > 1 else net
    torch.backends.cudnn.benchmark = True
    optimizer = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer,
        max_lr=args.lr,
        epochs=args.epochs,
        steps_per_epoch=len(train_loader) // args.accum,
    )

    for epoch in range(args.epochs):
        scheduler.step()
        model.train()
        for i, (ids, labels) in enumerate(train_loader):
            ids = ids.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(ids), labels)
            loss.backward()
            if (i + 1) % args.accum == 0:
                nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)

        accuracy = evaluate(model, val_loader, device)
        print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.2e}, val accuracy {accuracy:.2%}")
        torch.save(
            {"model": net.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch},
            args.out,
        )


if __name__ == "__main__":
    main()
