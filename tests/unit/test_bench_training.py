"""The training benchmark: where the CPU went (bench/cpu_share.py) and the ratios it reports."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench import load_sensitivity, training_overhead
from bench.cpu_share import CpuShare, kind_of

SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass  # {tag}"


def test_kinds_come_from_the_command_line():
    assert kind_of("python -m tony_airflow.examples.digits_keras --epochs 10") == "training"
    assert kind_of("bash -c exec /v/bin/python -m tony_airflow.core.executor") == "executor"
    assert kind_of("/v/bin/python -m tony_airflow.core.am") == "AM"
    assert kind_of("java -Dproc_resourcemanager org.apache.hadoop.yarn.server.resourcemanager.ResourceManager") \
        == "ResourceManager"
    assert kind_of("java -cp tony.jar com.linkedin.tony.TaskExecutor") == "executor"
    assert kind_of("sleep 5") == "other"


def test_a_process_born_and_gone_inside_the_window_is_counted():
    # what a process spends after its last sample is missed: this one idles a sample's length at the end
    with CpuShare(every=0.1) as share:
        subprocess.run([sys.executable, "-c", SPIN.format(s=1.0, tag="digits_keras") + "\ntime.sleep(0.3)"],
                       check=True)
    assert 0.9 <= share.seconds["training"] <= 1.3
    assert 0.3 <= share.cores("training") <= 1.0


def test_a_process_running_before_the_window_counts_only_inside_it():
    # it says when its busy part is over (on a loaded machine that is not "after a second")
    busy_then_idle = SPIN.format(s=0.5, tag="tony_airflow.core.am") + "\nprint('idle', flush=True)\ntime.sleep(2)"
    child = subprocess.Popen([sys.executable, "-c", busy_then_idle], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "idle\n"
        with CpuShare() as share:
            time.sleep(0.6)
        assert "AM" in share.seconds
        assert share.seconds["AM"] < 0.1
    finally:
        child.wait()


def test_the_cpu_table_is_the_medians_of_the_runs():
    def run(steady: float, training: float, launcher: float) -> training_overhead.Run:
        return training_overhead.Run(training_overhead.Speeds(steady, steady, 0.0, 1.0),
                                     {"training": training, "launcher": launcher, "YARN and HDFS": 0.1, "other": 0.0})

    done = {"YARN": [run(90.0, 1.7, 0.2), run(94.0, 1.8, 0.3), run(99.0, 1.9, 0.1)],
            "by hand": [run(100.0, 1.9, 0.0)], "TonY": [], "tf-yarn": []}
    report = training_overhead.cpu_report(done, "cmd")
    assert [row[0] for row in report.rows] == ["YARN", "by hand"]
    assert report.rows[0] == ["YARN", "1.80", "0.20", "0.10", "0.00", "0.30", "94.0"]
    assert "+0.20 cores more" in report.notes[-1] and "launcher's own +0.20" in report.notes[-1]


def test_each_rounds_ratio_pairs_the_runs_of_that_round():
    def run(steady: float) -> training_overhead.Run:
        return training_overhead.Run(training_overhead.Speeds(steady, steady, 0.0, 1.0), {})

    row = training_overhead._per_round([run(90.0), run(110.0), run(95.0)], [run(100.0), run(100.0), run(100.0)])
    assert row == ["ratio of each round (median)", "0.950", "0.950", "0.900, 1.100, 0.950"]


def test_the_synthetic_load_uses_the_share_of_a_core_it_is_given():
    burner = subprocess.Popen([sys.executable, "-c", load_sensitivity.BURNER, "0.2", "0.02"])
    time.sleep(2.0)
    burner.kill()
    _, _, usage = os.wait4(burner.pid, 0)
    burner.returncode = -9
    assert 0.2 <= usage.ru_utime + usage.ru_stime <= 0.6  # 0.2 of a core for 2 s, and the interpreter's start
