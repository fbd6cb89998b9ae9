"""Console and clock: log levels, progress lines, phase timing, process statistics."""
