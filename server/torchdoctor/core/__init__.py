"""The core: source text, parsing, names and scopes, torch facts (training loops, data,
distributed, checkpoints, graphs), kernel facts, fix building and the finding model. It knows no
rule, editor or terminal."""
