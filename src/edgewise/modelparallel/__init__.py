"""Model-parallel training placement on edge clusters (SROLE): each node's RL agent places its
job's layer partitions among its neighbours, a shield keeps nodes below the overload threshold."""
