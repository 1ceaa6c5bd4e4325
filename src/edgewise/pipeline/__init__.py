"""Partitioned, pipelined inference (SEIFER): where to cut a DNN and which device runs each
piece so that the pipeline's bottleneck latency is lowest."""
