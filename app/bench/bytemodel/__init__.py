"""The byte model: bytes a decode step or verify round reads, and the roofline they imply."""
