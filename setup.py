"""Build glue: everything declarative is in setup.cfg; only the package list needs code.

The shipped data stays at the top of the repository (``arch_configs/``, ``workloads/``,
``traces/``) and is mapped into the wheel as ``accel_sim/_data/...`` (read through
``accel_sim.resources``). ``setup.cfg`` cannot combine ``packages = find:`` with extra mapped
packages, so both lists are joined here.
"""

from setuptools import find_packages, setup

#: wheel package -> repository folder (its files are listed in setup.cfg's [options.package_data])
DATA_PACKAGES = {
    "accel_sim._data.arch_configs": "arch_configs",
    "accel_sim._data.workloads.models": "workloads/models",
    "accel_sim._data.workloads.sweeps": "workloads/sweeps",
    "accel_sim._data.traces": "traces",
}

setup(
    packages=find_packages(include=["accel_sim", "accel_sim.*"]) + list(DATA_PACKAGES),
    package_dir=DATA_PACKAGES,
)
