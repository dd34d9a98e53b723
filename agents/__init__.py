"""Node agent: discovers a host's GPUs, links and NICs, measures peers, reports to the service."""
