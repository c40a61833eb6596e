"""One module per `ling-chat` command: `add_arguments(parser)` and `run(args) -> int`."""
