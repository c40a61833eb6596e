"""What the engine's start-up shows: SGLang's log lines read as stages, and the load's progress."""
