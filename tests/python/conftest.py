# The spmdsim.testing plugin gives these tests the `topology` and `mesh` fixtures, as it gives users'.
pytest_plugins = ["spmdsim.testing"]
