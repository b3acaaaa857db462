"""Parts of the performance_baseline stage: the timing child, memory growth, soak, device clocks."""
