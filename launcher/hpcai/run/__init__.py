"""The LAUNCH pipeline: a site profile, a payload and the launch options planned into token lists,
run on Slurm (or mpiexec, or locally) in a container runtime, leaving a run record.

options.py -> plan.py (site.py, backends/, runtimes/) -> launch.py -> record.py; submit.py and
sweep.py build batch jobs and series on the same plan.
"""
