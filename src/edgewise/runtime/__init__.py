"""Carrying plans out on Ray: cluster, transport, parameter server, stages, faults."""
