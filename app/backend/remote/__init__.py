"""Remote chat over HTTP, and `ling-chat serve`."""
