"""torchdoctor: a PyTorch-aware linter and language server."""

__version__ = "0.1.0"
