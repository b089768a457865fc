"""Makes the repository importable and reports which agentscope is tested."""
