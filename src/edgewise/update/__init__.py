"""Model update (Deep-Edge): which devices retrain, with how much data and what batch size
each, without making co-located latency-critical apps miss their deadlines."""
