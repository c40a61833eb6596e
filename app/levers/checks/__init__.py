"""The guards of the results: no result-faking variable, the warm-up accept length."""
