"""One reader per agent CLI's output format; `providers.cli_output` picks one by name."""
