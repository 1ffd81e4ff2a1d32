"""Evaluate a trained checkpoint on a folder of labelled images and write per-image predictions.

python examples/evaluate.py runs/resnet50/best.pt /datasets/pets/test --out predictions.csv
"""

import argparse
import csv
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, models
from torchvision import transforms as T


def load_model(checkpoint_path: Path, num_classes: int) -> torch.nn.Module:
    # The training script stores its argparse config next to the weights.
    checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
    model = models.resnet50(num_classes=num_classes)
    model.load_state_dict(checkpoint["model"])
    print(f"loaded epoch {checkpoint['epoch']} (trained with {vars(checkpoint['args'])})")
    return model


def predict_one(checkpoint_path: Path, image: torch.Tensor, num_classes: int) -> int:
    # A quick single-image prediction with the same weights.
    model = models.resnet50(num_classes=num_classes)
    model.load_state_dict(torch.load(checkpoint_path, map_location="cpu")["model"])
    with torch.no_grad():
        return int(model(image.unsqueeze(0)).argmax(1))


def predict(model: torch.nn.Module, loader: DataLoader, device: torch.device):
    model.eval()
    all_probs, all_labels = [], []
    for images, labels in loader:
        logits = model(images.to(device))
        all_probs.append(F.softmax(logits, dim=1).cpu())
        all_labels.append(labels)
    return torch.cat(all_probs), torch.cat(all_labels)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("--out", type=Path, default=Path("predictions.csv"))
    parser.add_argument("--calibration", type=Path, help="temperature fitted on the val set")
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    transform = T.Compose(
        [
            T.Resize(256),
            T.CenterCrop(224),
            T.ToTensor(),
            T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ]
    )
    test_set = datasets.ImageFolder(args.data, transform)
    loader = DataLoader(test_set, batch_size=args.batch_size, num_workers=4, pin_memory=True)

    model = load_model(args.checkpoint, len(test_set.classes)).to(device)
    probs, labels = predict(model, loader, device)
    if args.calibration:
        temperature = torch.load(args.calibration)
        probs = F.softmax(probs.log() / temperature, dim=1)

    confidence, predicted = probs.max(dim=1)
    accuracy = (predicted == labels).float().mean().item()
    print(f"top-1 accuracy on {len(test_set)} images: {accuracy:.2%}")

    with args.out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["path", "label", "predicted", "confidence"])
        for (path, label), pred, conf in zip(test_set.samples, predicted, confidence, strict=True):
            writer.writerow([path, test_set.classes[label], test_set.classes[pred], f"{conf:.4f}"])


if __name__ == "__main__":
    main()
