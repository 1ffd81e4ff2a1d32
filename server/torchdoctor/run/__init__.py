"""``torchdoctor run``: run a training script under instrumentation and report what it measured.

``report`` (the JSON and where it lives) and ``findings`` (messages) import no torch; only
``_bootstrap``, which runs inside the user's process, does. ``command`` is the command line.
"""
