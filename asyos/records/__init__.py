"""What a run leaves behind: results, checkpoints and resuming, model files."""
