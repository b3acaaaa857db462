"""The parts of the functional_test stage: the operator catalog and its tolerances,
the comparison against a CPU float64 reference, the batched isolated runner, and
the model-traced, autograd, checkpoint, sparse, distributed and OpInfo checks."""
