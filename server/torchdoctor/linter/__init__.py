"""The linter: the registry of all rules, selection, configuration files and the run over a file,
notebook or folder (one parse and one analysis per check). The only layer that knows every rule."""
