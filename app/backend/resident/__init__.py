"""The resident engine: `ling-chat serve` kept loaded after the chat quits (`keep_engine`)."""
