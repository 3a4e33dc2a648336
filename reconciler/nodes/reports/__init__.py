"""What the reconciler says about nodes once per episode: Events and gauges for gates, node
agents and deadlocks."""
