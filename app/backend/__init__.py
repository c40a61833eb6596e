"""The model side: the protocol the UI sees (`protocol`), and the backends that implement it."""
