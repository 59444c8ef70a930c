# Gives the tests in this folder spmdsim's `topology` and `mesh` fixtures and its markers.
pytest_plugins = ["spmdsim.testing"]
