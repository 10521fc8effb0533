"""The TonY-style core: job spec, client, Application Master, task executors."""
