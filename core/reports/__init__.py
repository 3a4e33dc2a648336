"""What the day-2 commands report (`nodegate status|explain|plan`): cluster status, what a node
waits for, what a rules change would do, the gate census. The top floor of core, read only by
the CLI."""
