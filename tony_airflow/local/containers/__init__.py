"""Container engines on the node: the Docker daemon the local cluster needs, and the image it runs."""
