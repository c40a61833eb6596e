"""Before the first start: overrides, preflight checks, GPU probe, kernel builds."""
