"""Helpers shared by test modules: doubles, builders, clocks and Pilot steps (no fixtures)."""
