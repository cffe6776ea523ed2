"""Triggers: run in the triggerer, so they import only the installed package."""
