"""The compute meter counts the other trainer ranks' CPU seconds in core_hours on CPU, not in gpu_hours."""
from rlscale.train.compute import ComputeMeter


def test_follower_cpu_seconds_count_on_cpu_only():
    cpu, cuda = ComputeMeter(params=10, device_type="cpu"), ComputeMeter(params=10, device_type="cuda")
    for meter in (cpu, cuda):
        meter.add_training(trained_tokens=5, follower_cpu_s=7.2)
    assert cpu.as_metrics()["core_hours"] == 7.2 / 3600
    assert cuda.as_metrics()["gpu_hours"] == 0.0
    assert cpu.as_metrics()["flops"] == cuda.as_metrics()["flops"] == 6.0 * 10 * 5
