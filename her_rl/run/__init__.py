"""One run: plan it, build the learner, train, evaluate, and end it (signals, requeue, results); the
progress line, TensorBoard and video beside it."""
