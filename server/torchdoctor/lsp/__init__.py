"""The torchdoctor language server: ``torchdoctor server`` (stdio, or ``--tcp HOST:PORT``)."""
