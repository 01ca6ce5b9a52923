"""The second numeric configuration of ``make test`` (tests/other_cpu.env) really imitates
another CPU: the same seeded float32 computations give other low-order bits under it.

If it did not, the second notebook run would only repeat the first and prove nothing.
"""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

ENV_FILE = Path(__file__).resolve().parents[1] / "other_cpu.env"

PROBE = r"""
import hashlib, torch
torch.manual_seed(0)
a, b = torch.randn(257, 129), torch.randn(129, 263)
results = {
    "matmul": a @ b,
    "column sums": a.sum(0),
    "softmax": torch.softmax(a, 1),
    "layer norm": torch.nn.functional.layer_norm(a, (129,)),
}
for name, value in results.items():
    print(name, hashlib.sha256(value.numpy().tobytes()).hexdigest())
"""


def other_cpu_environment() -> dict[str, str]:
    pairs = [line.split("=", 1) for line in ENV_FILE.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    return {key.strip(): value.strip() for key, value in pairs}


def run_probe(extra: dict[str, str]) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in other_cpu_environment()}
    environment.update(extra)
    output = subprocess.run([sys.executable, "-c", PROBE], env=environment, check=True,
                            capture_output=True, text=True).stdout
    return dict(line.rsplit(" ", 1) for line in output.splitlines())


def test_the_environment_file_sets_the_dispatch_variables():
    assert set(other_cpu_environment()) >= {"ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                                           "MKL_ENABLE_INSTRUCTIONS", "OMP_NUM_THREADS"}


def test_the_second_configuration_changes_low_order_bits():
    usual, other = run_probe({}), run_probe(other_cpu_environment())
    changed = [name for name in usual if usual[name] != other[name]]
    assert len(changed) >= 3, f"only {changed} changed: the second run would repeat the first"
    # ...while each run on its own is deterministic (else strict nbval could never pass)
    assert run_probe({}) == usual
