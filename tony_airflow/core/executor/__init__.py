"""The task executor: runs in every task container and starts the user's command."""
