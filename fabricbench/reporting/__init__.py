"""Presenting results: terminal tables (rich), CSV, plots."""
