"""Talking to YARN and HDFS: configuration discovery, RM REST, WebHDFS, the local cluster."""
