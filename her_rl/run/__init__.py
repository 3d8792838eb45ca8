"""One run: plan it, build the learner, train, evaluate, and end it (signals, requeue, results); the
progress line, TensorBoard and the trackers beside it. A saved run is used from :mod:`her_rl.saved`."""
