"""The core: source text, parsing, names and scopes (``semantic``), torch facts by subject
(``kinds``: what a value is; ``training``: loops, backward, optimizer steps, grad mode, autocast;
``data``; ``distributed``; ``checkpoints``; ``graphs``), kernel facts, fix building and the
finding model. It knows no rule, editor or terminal."""
