"""Character-level LSTM language model in reduced precision, tuned to fit a small GPU.

    python examples/mixed_precision_memory.py --text shakespeare.txt
    python examples/mixed_precision_memory.py --text shakespeare.txt --half   # less memory

Truncated backpropagation through time: the text is cut into `--bptt`-character chunks and the
LSTM state is carried from one chunk to the next.
"""

import argparse
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--text", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--bptt", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--half", action="store_true", help="keep the weights in float16")
    return parser.parse_args()


class CharLSTM(nn.Module):
    def __init__(self, vocab: int, dim: int = 512, layers: int = 3) -> None:
        super().__init__()
        self.layers = layers
        self.dim = dim
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, num_layers=layers, dropout=0.2, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def init_state(
        self, batch: int, device: torch.device, dtype: torch.dtype = torch.float32
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # cuDNN wants contiguous hidden states.
        h = torch.zeros(self.layers, batch, self.dim, device=device, dtype=dtype).contiguous()
        c = torch.zeros(self.layers, batch, self.dim, device=device, dtype=dtype).contiguous()
        return h, c

    def forward(
        self, chars: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        out, state = self.lstm(self.embed(chars), state)
        return self.head(out), state


def chunks(ids: torch.Tensor, batch: int, bptt: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """`batch` parallel streams over the text, `bptt` characters at a time."""
    usable = (ids.numel() - 1) // batch * batch
    inputs = ids[:usable].view(batch, -1)
    targets = ids[1 : usable + 1].view(batch, -1)
    for start in range(0, inputs.size(1), bptt):
        yield inputs[:, start : start + bptt], targets[:, start : start + bptt]


def sample(model: CharLSTM, alphabet: list[str], device: torch.device, length: int = 300) -> None:
    model.eval()
    with torch.no_grad():
        state = model.init_state(1, device, next(model.parameters()).dtype)
        char = torch.tensor([[alphabet.index("\n")]], device=device)
        text = []
        for _ in range(length):
            logits, state = model(char, state)
            char = torch.multinomial(F.softmax(logits[0, -1].float(), dim=-1), 1)[None]
            text.append(alphabet[char.item()])
        print("".join(text))


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda")
    text = args.text.read_text(encoding="utf-8")
    alphabet = sorted(set(text))
    ids = torch.tensor([alphabet.index(ch) for ch in text], device=device)

    model = CharLSTM(len(alphabet)).to(device)
    if args.half:
        model = model.half()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    dtype = next(model.parameters()).dtype

    for epoch in range(args.epochs):
        model.train()
        state = model.init_state(args.batch_size, device, dtype)
        total, steps = 0.0, 0
        for inputs, targets in chunks(ids, args.batch_size, args.bptt):
            with torch.autocast("cuda"):
                logits, state = model(inputs, state)
                loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
            optimizer.zero_grad(set_to_none=True)
            # The state carries the previous chunk's graph: keep it for the next backward.
            loss.backward(retain_graph=True)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            total += loss.item()
            steps += 1
            torch.cuda.empty_cache()  # keep the memory curve flat
        print(f"epoch {epoch}: loss {total / steps:.3f}")
        sample(model, alphabet, device)

    torch.save(model.state_dict(), "char_lstm.pt")


if __name__ == "__main__":
    main()
