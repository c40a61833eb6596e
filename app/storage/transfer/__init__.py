"""The history's files: exports (Markdown, HTML, JSON, JSONL, CSV) and imports of them."""
