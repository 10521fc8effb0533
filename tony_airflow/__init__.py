"""TensorFlow and PyTorch training (or any command) on Apache Hadoop YARN, as one node of an existing data
pipeline."""

__version__ = "0.1.0"
