"""The run folder: its layout and lock (rundir), checkpoints, resume, the run's counters (state), the
metrics file and a sweep job's failure record."""
