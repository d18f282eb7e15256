"""The data plane: the PySpark job runner and everything that runs in the Spark driver."""
