"""The rules: one rule per ``tdrNNN_*`` module, each a :class:`~torchdoctor.rules.base.Rule`
whose docstring is its documentation. Rules read the analysis context (``core``) and know no
editor or terminal; the linter layer (``torchdoctor.linter.registry``) finds and runs them."""
