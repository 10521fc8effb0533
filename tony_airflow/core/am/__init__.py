"""The Python Application Master: runs as skein's master script in the AM container."""
