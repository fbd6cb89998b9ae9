"""Learners: Online Substitution (sequential and asynchronous) and the batch baselines."""
