"""Train a keyword-spotting model with `torch.compile`, then export it for serving.

    python examples/compile_and_export.py --data mels.pt --epochs 20 --out exported/

`mels.pt` holds log-mel spectrograms `(clips, 40, frames)` and their keyword labels. The script
writes a `torch.export` program for the Python server, an ONNX file for the phone app and a
TorchScript module for the old C++ runtime.
"""

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N_MELS = 40
KEYWORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--out", type=Path, default=Path("exported"))
    return parser.parse_args()


class KeywordSpotter(nn.Module):
    """1-D convolutions over time, a GRU, and a classifier over the pooled states."""

    def __init__(self, n_mels: int = N_MELS, hidden: int = 128, n_classes: int = 10) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(n_mels, hidden, kernel_size=5, padding=2),
            nn.GELU(),
            nn.Conv1d(hidden, hidden, kernel_size=5, padding=2),
            nn.GELU(),
        )
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        x = self.conv(mels)
        # Clips recorded with the gain at zero give -inf log-mels; clean them up.
        if not torch.isfinite(x).all():
            x = torch.nan_to_num(x, neginf=0.0)
        x, _ = self.gru(x.transpose(1, 2))
        return self.head(x.mean(dim=1))


def export_all(model: KeywordSpotter, example: torch.Tensor, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    program = torch.export.export(model, (example,))
    torch.export.save(program, out / "spotter.pt2")
    torch.onnx.export(
        model,
        (example,),
        out / "spotter.onnx",
        input_names=["mels"],
        output_names=["logits"],
        dynamic_axes={"mels": {0: "batch", 2: "frames"}, "logits": {0: "batch"}},
    )


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    clips, targets = torch.load(args.data, map_location="cpu")
    loader = DataLoader(
        TensorDataset(clips, targets),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=2,
        pin_memory=True,
        generator=torch.Generator().manual_seed(0),
    )

    model = KeywordSpotter(n_classes=len(KEYWORDS)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        # Recompile every epoch in case the clip lengths changed.
        compiled = torch.compile(model)
        model.train()
        for mels, labels in loader:
            mels = mels.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(compiled(mels), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: last loss {loss.item():.3f}")

    model = model.cpu().eval()
    example = torch.randn(1, N_MELS, 101)  # one second of audio, 10 ms hop
    export_all(model, example, args.out)
    # The C++ runtime of the old app only reads TorchScript.
    scripted = torch.jit.trace(model, (example,))
    scripted.save(str(args.out / "spotter.ts"))


if __name__ == "__main__":
    main()
