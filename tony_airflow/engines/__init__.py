"""Entry points that other workflow engines (Azkaban, Oozie) run as a plain process.

Each maps its engine's input onto the core's job options, then hands the job
to `runner.run_to_completion`, which every engine shares.
"""
