"""Carrying out a run: its configuration, problem, the family runners, summary and picture."""
