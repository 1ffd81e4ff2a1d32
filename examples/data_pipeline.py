"""Land-cover classification of satellite tiles, with the input pipeline written by hand.

    python examples/data_pipeline.py --tiles /data/eurosat/tiles --labels /data/eurosat/labels.csv

`labels.csv` has one row per tile: `tile,split,label`. Training tiles get random crops and flips;
the validation tiles are few enough to keep in memory.
"""

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision.models import resnet18

CLASSES = (
    "AnnualCrop", "Forest", "HerbaceousVegetation", "Highway", "Industrial",
    "Pasture", "PermanentCrop", "Residential", "River", "SeaLake",
)  # fmt: skip
CROP = 56
SEED = 1234


def to_tensor(image: Image.Image) -> torch.Tensor:
    array = np.asarray(image, dtype=np.float32) / 255.0
    return torch.from_numpy(array).permute(2, 0, 1)


class TrainTiles(Dataset):
    """Random crops of the training tiles, flipped at random."""

    def __init__(self, root: Path, labels_csv: Path) -> None:
        self.root = root
        self.labels_csv = labels_csv
        table = pd.read_csv(labels_csv)
        self.tiles = table.index[table["split"] == "train"].tolist()
        self.rng = np.random.default_rng(SEED)

    def __len__(self) -> int:
        return len(self.tiles)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        table = pd.read_csv(self.labels_csv)
        row = table.iloc[self.tiles[index]]
        image = to_tensor(Image.open(self.root / row["tile"]).convert("RGB"))
        top, left = self.rng.integers(0, image.shape[1] - CROP, size=2)
        image = image[:, top : top + CROP, left : left + CROP]
        if self.rng.random() < 0.5:
            image = image.flip(-1)
        return image, CLASSES.index(row["label"])


class ValTiles(Dataset):
    """Centre crops of the validation tiles, decoded once."""

    def __init__(self, root: Path, labels_csv: Path) -> None:
        table = pd.read_csv(labels_csv)
        table = table[table["split"] == "val"]
        self.images = [Image.open(root / name).convert("RGB") for name in table["tile"]]
        self.labels = [CLASSES.index(label) for label in table["label"]]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = to_tensor(self.images[index])
        offset = (image.shape[1] - CROP) // 2
        return image[:, offset : offset + CROP, offset : offset + CROP], self.labels[index]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiles", type=Path, required=True)
    parser.add_argument("--labels", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=15)
    args = parser.parse_args()

    torch.manual_seed(SEED)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    train_loader = DataLoader(
        TrainTiles(args.tiles, args.labels),
        batch_size=256,
        shuffle=True,
        num_workers=64,  # one per core on the DGX
        drop_last=True,
        collate_fn=lambda batch: (
            torch.stack([image for image, _ in batch]),
            torch.tensor([label for _, label in batch]),
        ),
    )
    val_loader = DataLoader(
        ValTiles(args.tiles, args.labels), batch_size=512, num_workers=8, pin_memory=True
    )

    model = resnet18(num_classes=len(CLASSES)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)

    for epoch in range(args.epochs):
        model.train()
        for images, labels in train_loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in val_loader:
                logits = model(images.to(device, non_blocking=True))
                correct += (logits.argmax(1).cpu() == labels).sum().item()
        print(f"epoch {epoch}: val accuracy {correct / len(val_loader.dataset):.2%}")

    torch.save(model.state_dict(), "landcover_resnet18.pt")


if __name__ == "__main__":
    main()
