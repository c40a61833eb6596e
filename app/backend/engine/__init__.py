"""The in-process SGLang engine: config, setup, the boot, replies, SGLang's processes and log."""
