"""Process plumbing: signals, output to the log, redaction, the log file, crash reports."""
