# A package, so that this folder's conftest.py is imported as slurm.conftest and does not take the
# place of tests/conftest.py, which the test modules import as `conftest`.
